/* OpenMPI's side of the side-by-side benchmark (benches/mpi/run): the same collectives,
 * sizes and timing rule as ruccl-perf (each rank times ITERS calls back to back after a
 * warm-up and a barrier; the printed time is the mean over ranks, then rank 0's and the
 * slowest rank's, as `ruccl-perf -a 0` and `-a 3` print them), so that the two tables
 * compare row by row. Float elements; sizes as nccl-tests (see `ruccl-perf --help`).
 *
 * Usage: mpirun -np N ./collectives BYTES ITERS [COLLECTIVE|all] [WARMUP]
 *        (one collective, or all but all_reduce_in_place, which runs only when named; WARMUP
 *        calls before each timed loop, ITERS / 10 + 5 by default)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*coll_fn)(float *in, float *out, int count, int ranks);

static void all_reduce(float *in, float *out, int count, int ranks) {
    (void)ranks;
    MPI_Allreduce(in, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}
/* In place, as torch's DDP calls it: the result overwrites the input (ruccl-perf's in-place
 * column). Run only when named. */
static void all_reduce_in_place(float *in, float *out, int count, int ranks) {
    (void)in; (void)ranks;
    MPI_Allreduce(MPI_IN_PLACE, out, count, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}
static void broadcast(float *in, float *out, int count, int ranks) {
    (void)out; (void)ranks;
    MPI_Bcast(in, count, MPI_FLOAT, 0, MPI_COMM_WORLD);
}
static void reduce(float *in, float *out, int count, int ranks) {
    (void)ranks;
    MPI_Reduce(in, out, count, MPI_FLOAT, MPI_SUM, 0, MPI_COMM_WORLD);
}
static void all_gather(float *in, float *out, int count, int ranks) {
    MPI_Allgather(in, count / ranks, MPI_FLOAT, out, count / ranks, MPI_FLOAT, MPI_COMM_WORLD);
}
static void reduce_scatter(float *in, float *out, int count, int ranks) {
    MPI_Reduce_scatter_block(in, out, count / ranks, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
}
static void all_to_all(float *in, float *out, int count, int ranks) {
    MPI_Alltoall(in, count / ranks, MPI_FLOAT, out, count / ranks, MPI_FLOAT, MPI_COMM_WORLD);
}
static void gather(float *in, float *out, int count, int ranks) {
    MPI_Gather(in, count / ranks, MPI_FLOAT, out, count / ranks, MPI_FLOAT, 0, MPI_COMM_WORLD);
}
static void scatter(float *in, float *out, int count, int ranks) {
    MPI_Scatter(in, count / ranks, MPI_FLOAT, out, count / ranks, MPI_FLOAT, 0, MPI_COMM_WORLD);
}

int main(int argc, char **argv) {
    MPI_Init(&argc, &argv);
    int rank, ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    long bytes = argc > 1 ? atol(argv[1]) : 16;
    int iters = argc > 2 ? atoi(argv[2]) : 1000;
    const char *only = argc > 3 && strcmp(argv[3], "all") != 0 ? argv[3] : NULL;
    int warmup = argc > 4 ? atoi(argv[4]) : iters / 10 + 5;
    int count = (int)(bytes / (long)sizeof(float));
    if (count < ranks) count = ranks; /* the gather family needs an element per rank */
    float *in = calloc((size_t)count, sizeof(float));
    float *out = calloc((size_t)count, sizeof(float));
    if (!in || !out) { fprintf(stderr, "cannot allocate 2 x %ld bytes\n", bytes); MPI_Abort(MPI_COMM_WORLD, 1); }
    /* Write every page of both buffers before timing, as ruccl-perf does. A large `calloc`
     * is fresh zero-fill-on-demand memory: a buffer that is only ever read (every input here)
     * would map the kernel's one shared zero page (or huge zero page) at every address, so
     * every read of it -- a peer's single-copy read included -- would hit the same few
     * cache-hot lines instead of the buffer's bytes (2 processes, all_gather 4 MiB: 228-255
     * us with untouched inputs, 318+ with written ones). */
    for (int i = 0; i < count; i++) { in[i] = (float)(rank + 1 + i % 7); out[i] = 0.5f; }
    static const struct { const char *name; coll_fn fn; } colls[] = {
        {"all_reduce", all_reduce}, {"all_reduce_in_place", all_reduce_in_place},
        {"broadcast", broadcast}, {"reduce", reduce},
        {"all_gather", all_gather}, {"reduce_scatter", reduce_scatter},
        {"all_to_all", all_to_all}, {"gather", gather}, {"scatter", scatter},
    };
    if (rank == 0) printf("# OpenMPI, %d processes, %ld bytes (float), %d iterations\n", ranks, bytes, iters);
    for (size_t c = 0; c < sizeof colls / sizeof colls[0]; c++) {
        if (only ? strcmp(only, colls[c].name) != 0 : colls[c].fn == all_reduce_in_place) continue;
        for (int i = 0; i < warmup; i++) colls[c].fn(in, out, count, ranks);
        MPI_Barrier(MPI_COMM_WORLD);
        double t0 = MPI_Wtime();
        for (int i = 0; i < iters; i++) colls[c].fn(in, out, count, ranks);
        double us = (MPI_Wtime() - t0) / iters * 1e6, sum = 0, max = 0;
        MPI_Reduce(&us, &sum, 1, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
        MPI_Reduce(&us, &max, 1, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
        /* Rank 0 (every root here) and the slowest rank too: a rank that only sends eagerly
         * (a non-root of gather or reduce) can finish long before its root, and the mean
         * then reads lower than any rank's wait for the result. */
        if (rank == 0) printf("%-16s %10.2f us   rank 0 %.2f, max %.2f\n", colls[c].name, sum / ranks, us, max);
    }
    free(in);
    free(out);
    MPI_Finalize();
    return 0;
}
