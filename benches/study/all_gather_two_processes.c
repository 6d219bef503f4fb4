// What a 2-process out-of-place all_gather costs at its core, and what moves it: each process
// copies its own block into its output and reads the peer's block out of the peer's input
// with process_vm_readv (what ruCCL's shared-memory transport and OpenMPI's vader both do),
// or pushes its block into the peer's output with process_vm_writev.
//
//   gcc -O2 -o /tmp/ag benches/study/all_gather_two_processes.c
//   /tmp/ag BLOCK ITERS [pull|push] [IN_OFF OUT_OFF] [untouched]
//
// IN_OFF / OUT_OFF: where the input and the output start past a page boundary (both
// processes alike). "untouched": the input is fresh zero-fill memory nobody writes, as a
// large calloc'd buffer a benchmark only reads -- every page of it then maps the kernel's one
// zero page, and every read hits the same few cache-hot lines.
//
// Session 36, this 2-core VM, us per call (PERFORMANCE.md, session 36):
//   128 KiB blocks (a 256 KiB all_gather), pull: offsets 16/16 8.8-8.9, 0/0 9.1-10.2
//     (mutually aligned); 32/16 9.7-9.9 and 0/8 9.7-10.6 (not); push, 0/0: 8.4-8.5.
//   512 KiB blocks (1 MiB), 16/16: pull 46-50, push 35-36.
//   2 MiB blocks (4 MiB), 16/16, pull: 322-350 written, 230-237 with an untouched input.
#define _GNU_SOURCE
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

typedef struct {
    _Atomic long started[2];
    char pad[48];
    _Atomic long done[2];
    char *in[2], *out[2];
    pid_t pid[2];
} shared_t;

static double now_us(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec * 1e6 + t.tv_nsec / 1e3;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: %s BLOCK ITERS [pull|push] [IN_OFF OUT_OFF] [untouched]\n", argv[0]);
        return 2;
    }
    size_t block = strtoul(argv[1], 0, 10);
    int iters = atoi(argv[2]), warm = iters / 10 + 10;
    int push = argc > 3 && strcmp(argv[3], "push") == 0;
    size_t in_off = argc > 5 ? strtoul(argv[4], 0, 10) : 0, out_off = argc > 5 ? strtoul(argv[5], 0, 10) : 0;
    int untouched = argc > 6 && strcmp(argv[6], "untouched") == 0;
    shared_t *s = mmap(0, sizeof *s, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    int me = fork() == 0, peer = 1 - me;
    char *in = (char *)mmap(0, block + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) + in_off;
    char *out = (char *)mmap(0, 2 * block + 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0) + out_off;
    if (!untouched) memset(in, me + 1, block);
    memset(out, 0, 2 * block);
    s->in[me] = in, s->out[me] = out, s->pid[me] = getpid();
    atomic_store(&s->started[me], 1);
    while (atomic_load(&s->started[peer]) < 1) {}
    double t0 = 0;
    for (int it = 0; it < warm + iters; it++) {
        if (it == warm) t0 = now_us();
        atomic_store(&s->started[me], it + 2);
        while (atomic_load(&s->started[peer]) < it + 2) {}
        if (push) {
            struct iovec l = {in, block}, r = {s->out[peer] + me * block, block};
            if (process_vm_writev(s->pid[peer], &l, 1, &r, 1, 0) != (ssize_t)block) { perror("writev"); return 1; }
        } else {
            struct iovec l = {out + peer * block, block}, r = {s->in[peer], block};
            if (process_vm_readv(s->pid[peer], &l, 1, &r, 1, 0) != (ssize_t)block) { perror("readv"); return 1; }
        }
        memcpy(out + me * block, in, block);
        // The peer has read (or written) this process's memory for this call.
        atomic_store(&s->done[me], it + 1);
        while (atomic_load(&s->done[peer]) < it + 1) {}
    }
    double us = (now_us() - t0) / iters;
    if (!untouched && (out[peer * block] != peer + 1 || out[me * block] != me + 1)) printf("wrong result\n");
    if (me == 0) {
        printf("block %zu, %s, offsets %zu/%zu%s: %.2f us\n", block, push ? "push" : "pull", in_off, out_off,
               untouched ? ", untouched input" : "", us);
        wait(0);
    }
    return 0;
}
