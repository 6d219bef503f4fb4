/* The 2-process all_reduce over loopback TCP with no library around it: how close a minimal
 * implementation gets to one TCP stream on this machine (PERFORMANCE.md, session 34). Not a
 * cargo target:
 *
 *   gcc -O3 -march=native -pthread benches/study/tcp_ring.c -o /tmp/tcp_ring
 *   /tmp/tcp_ring 64 10 1024    # MiB, timed calls, chunk KiB; prints busbw (= algbw for 2)
 *
 * The process forks its peer. Each call: a sender thread writes the half of the input the
 * peer reduces, then this rank's reduced half chunk by chunk as soon as each is reduced; the
 * main thread receives the peer's part of its own half chunk by chunk into one hot buffer,
 * reduces it into the output, then receives the peer's reduced half straight into the
 * output. Every byte crosses the socket once each way, nothing is copied that need not be. */
#include <arpa/inet.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static size_t S, H, CH;
static float *in, *out;
static int sock, me;
static atomic_size_t reduced;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}
static void sendall(const char *p, size_t n) {
    while (n) {
        ssize_t k = send(sock, p, n, 0);
        if (k <= 0) { perror("send"); exit(1); }
        p += k, n -= (size_t)k;
    }
}
static void recvall(char *p, size_t n) {
    while (n) {
        ssize_t k = recv(sock, p, n, 0);
        if (k <= 0) { perror("recv"); exit(1); }
        p += k, n -= (size_t)k;
    }
}
static void *sender(void *unused) {
    (void)unused;
    sendall((char *)in + (1 - me) * H, H);
    char *mine = (char *)out + me * H;
    size_t done = 0;
    while (done < H) {
        size_t r;
        while ((r = atomic_load(&reduced)) == done) {}
        sendall(mine + done, r - done);
        done = r;
    }
    return NULL;
}
int main(int argc, char **argv) {
    if (argc < 4) { fprintf(stderr, "usage: %s MiB calls chunk-KiB\n", argv[0]); return 2; }
    S = (size_t)atol(argv[1]) << 20, H = S / 2, CH = (size_t)atol(argv[3]) << 10;
    int iters = atoi(argv[2]), one = 1, port = 30000 + getpid() % 20000;
    int ls = socket(AF_INET, SOCK_STREAM, 0);
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(port)};
    a.sin_addr.s_addr = htonl(0x7f000001);
    if (bind(ls, (void *)&a, sizeof a) || listen(ls, 1)) { perror("bind"); return 1; }
    me = fork() == 0;
    if (me) {
        close(ls);
        sock = socket(AF_INET, SOCK_STREAM, 0);
        while (connect(sock, (void *)&a, sizeof a)) usleep(1000);
    } else {
        sock = accept(ls, NULL, NULL);
    }
    setsockopt(sock, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    in = aligned_alloc(4096, S), out = aligned_alloc(4096, S);
    float *tmp = aligned_alloc(4096, CH);
    for (size_t i = 0; i < S / 4; i++) in[i] = (float)(me + 1);
    memset(out, 0, S);
    double sum = 0;
    for (int it = 0; it < iters + 2; it++) {
        char c = 0;
        sendall(&c, 1), recvall(&c, 1);
        double t0 = now();
        atomic_store(&reduced, 0);
        pthread_t th;
        pthread_create(&th, NULL, sender, NULL);
        float *x = (float *)((char *)in + me * H), *y = (float *)((char *)out + me * H);
        for (size_t d = 0; d < H; d += CH) {
            size_t k = H - d < CH ? H - d : CH;
            recvall((char *)tmp, k);
            for (size_t i = 0; i < k / 4; i++) y[d / 4 + i] = x[d / 4 + i] + tmp[i];
            atomic_store(&reduced, d + k);
        }
        recvall((char *)out + (1 - me) * H, H);
        pthread_join(th, NULL);
        if (it >= 2) sum += now() - t0;
    }
    for (size_t i = 0; i < S / 4; i += 1024)
        if (out[i] != 3.0f) { printf("wrong at %zu: %f\n", i, out[i]); return 1; }
    if (!me) {
        printf("%zu MiB, chunk %zu KiB: busbw %.2f GB/s (mean of %d)\n", S >> 20, CH >> 10, S / (sum / iters) / 1e9, iters);
        wait(NULL);
    }
    return 0;
}
