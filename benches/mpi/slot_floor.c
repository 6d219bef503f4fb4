/* The floor of a 16-byte exchanged op between two processes of this host: what the
 * exchange slots' protocol costs with nothing around it (no validation, no guards, no
 * flight recorder), to compare ruccl-perf's and OpenMPI's 16-byte rows with (PERFORMANCE.md,
 * session 48). Two processes (a fork), each pinned to its own CPU (0 and 1), share 128 slots
 * per rank of one 128-byte line, as `transport::slots` lays them out: each op, a process
 * stores a 5-word fingerprint and a 16-byte part in its slot, then the sequence number
 * (release); optionally a SeqCst fence (as `wake_peers` takes) and a look at a peer's flag
 * line; waits for the peer's sequence number (acquire), checks its fingerprint, adds its 4
 * floats, and stores its `done` word; optionally a second fence (as after `finish`).
 *
 * Build: cc -O2 -o slot_floor benches/mpi/slot_floor.c
 * Usage: ./slot_floor FENCES OPS    (FENCES 0, 1 or 2; prints us per op)
 *
 * On this 2-vCPU machine it reads two ways, by where the hypervisor places the vCPUs (the
 * mode lasts minutes, and OpenMPI's and ruCCL's rows move with it): ~0.07-0.08 us or
 * ~0.20-0.27 us per op.
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define DEPTH 128
typedef struct {
    _Alignas(128) volatile uint64_t w[16];
} line;
typedef struct {
    line slot[2][DEPTH];
    line done[2];
    line sleeps[2];
} shared;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    if (argc != 3) {
        fprintf(stderr, "usage: %s FENCES OPS\n", argv[0]);
        return 2;
    }
    int fences = atoi(argv[1]);
    long n = atol(argv[2]);
    shared *s = mmap(0, sizeof(shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (s == MAP_FAILED) {
        perror("mmap");
        return 1;
    }
    int me = fork() == 0 ? 1 : 0, peer = 1 - me;
    cpu_set_t c;
    CPU_ZERO(&c);
    CPU_SET(me, &c);
    sched_setaffinity(0, sizeof c, &c);
    float in[4] = {1, 2, 3, 4}, out[4];
    uint64_t fp[5] = {1, 2, 3, 4, 5};
    double t0 = 0;
    /* n ops of warm-up, then n timed. */
    for (long seq = 0; seq < 2 * n; seq++) {
        if (seq == n) t0 = now();
        line *l = &s->slot[me][seq % DEPTH];
        for (int i = 0; i < 5; i++) l->w[1 + i] = fp[i];
        uint64_t a, b;
        memcpy(&a, in, 8);
        memcpy(&b, in + 2, 8);
        l->w[6] = a;
        l->w[7] = b;
        __atomic_store_n(&l->w[0], seq + 1, __ATOMIC_RELEASE);
        if (fences) __atomic_thread_fence(__ATOMIC_SEQ_CST);
        volatile uint64_t asleep = s->sleeps[peer].w[0];
        (void)asleep;
        line *p = &s->slot[peer][seq % DEPTH];
        while (__atomic_load_n(&p->w[0], __ATOMIC_ACQUIRE) != (uint64_t)seq + 1) __builtin_ia32_pause();
        for (int i = 0; i < 5; i++)
            if (p->w[1 + i] != fp[i]) abort();
        uint64_t pa = p->w[6], pb = p->w[7];
        float q[4];
        memcpy(q, &pa, 8);
        memcpy(q + 2, &pb, 8);
        for (int i = 0; i < 4; i++) out[i] = in[i] + q[i];
        __atomic_store_n(&s->done[me].w[0], seq + 1, __ATOMIC_RELEASE);
        if (fences > 1) __atomic_thread_fence(__ATOMIC_SEQ_CST);
    }
    double t = now() - t0;
    if (me == 0) {
        wait(0);
        printf("fences %d: %.3f us per op\n", fences, t / n * 1e6);
    }
    return out[0] != 2.0f;
}
