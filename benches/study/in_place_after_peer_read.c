/* What a peer's single-copy read costs the rank that lent the memory, when that rank then
 * changes it: the cost behind an in-place all_reduce's small messages going through the ring
 * rather than by single copy between 2 processes (src/transport/tcp/shm_lend.rs `lendable`;
 * PERFORMANCE.md, session 35). Not a cargo target:
 *
 *   gcc -O2 -mprfchw benches/study/in_place_after_peer_read.c -o /tmp/ipr
 *   for m in 0 1 2 3; do /tmp/ipr 32768 40000 $m; done
 *
 * The process forks its peer. In lock-step, the peer reads x (process_vm_readv, as a
 * single-copy receive does), then this process runs one pass over x; it prints the pass's
 * mean time. Modes:
 *   0  x[k] += y[k], the peer does not read x                       (the baseline)
 *   1  x[k] += y[k] after the peer read x                            (an in-place reduce)
 *   2  x[k] = w[k] + y[k] after the peer read x: x written, not read (an out-of-place one)
 *   3  mode 1 after a prefetch-for-write of every line of x
 * Seen on this 2-core VM (32 KiB, us per pass): 0: 2.2-2.3; 1: 8-16; 2: 3.4-4.1; 3: 4.9-5.6.
 * After another core read a line, reading it here is free; changing it then takes a second
 * transfer of the line (the other core's copy is invalidated), one line at a time. */
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    _Atomic long seq[2];
    pid_t pid[2];
    void *x;
} shared_t;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    size_t n = (argc > 1 ? strtoul(argv[1], 0, 0) : 32768) / sizeof(float);
    int iters = argc > 2 ? atoi(argv[2]) : 20000, mode = argc > 3 ? atoi(argv[3]) : 1;
    shared_t *sh = mmap(0, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int r = fork() == 0 ? 1 : 0;
    float *x = aligned_alloc(4096, n * 4), *y = aligned_alloc(4096, n * 4);
    float *w = aligned_alloc(4096, n * 4), *z = aligned_alloc(4096, n * 4);
    for (size_t i = 0; i < n; i++) x[i] = 1, y[i] = 1e-9f, w[i] = 2;
    sh->pid[r] = getpid();
    if (r == 0) sh->x = x;
    atomic_fetch_add(&sh->seq[r], 1);
    while (atomic_load(&sh->seq[1 - r]) < 1) {}
    double total = 0;
    for (int i = 0; i < iters; i++) {
        if (r == 1) { /* the peer: once pass i is done, read x */
            while (atomic_load(&sh->seq[0]) < i + 2) {}
            if (mode != 0) {
                struct iovec l = {z, n * 4}, rm = {sh->x, n * 4};
                process_vm_readv(sh->pid[0], &l, 1, &rm, 1, 0);
            }
            atomic_fetch_add(&sh->seq[1], 1);
            continue;
        }
        while (atomic_load(&sh->seq[1]) < i + 1) {}
        double t0 = now();
        if (mode == 2) {
            for (size_t k = 0; k < n; k++) x[k] = w[k] + y[k];
        } else {
            if (mode == 3)
                for (size_t k = 0; k < n; k += 16) __builtin_prefetch(&x[k], 1, 3);
            for (size_t k = 0; k < n; k++) x[k] += y[k];
        }
        total += now() - t0;
        atomic_fetch_add(&sh->seq[0], 1);
    }
    if (r == 0) {
        printf("%zu bytes, mode %d: %.2f us per pass\n", n * 4, mode, total / iters * 1e6);
        wait(0);
    }
    return 0;
}
