/*
 * one_shot_bound: the bound under nexar's one-shot allreduce on this
 * machine (docs/how-it-works.md, "Small calls").  Two processes on cores 0 and 1, a
 * shared mapping, and per call exactly the one-shot's work with nothing of
 * MPI or nexar around it: copy the input into this process's slot,
 * publish the call's number, wait for the other's, sum both slots into the
 * result.  Not built by make (it needs no MPI):
 *
 *   cc -O3 -march=native bench/one_shot_bound.c -o one_shot_bound
 *   ./one_shot_bound BYTES [CALLS]        # e.g. ./one_shot_bound 16384 200000
 */
#define _GNU_SOURCE
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define MAX_BYTES (1 << 20)
struct board {
    _Alignas(64) atomic_ulong published;
    _Alignas(64) char slots[2][MAX_BYTES];
};

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec * 1e-9;
}

int main(int argc, char **argv) {
    size_t bytes = argc > 1 ? strtoul(argv[1], NULL, 10) : 16384;
    long calls = argc > 2 ? atol(argv[2]) : 200000;
    if (bytes == 0 || bytes > MAX_BYTES || bytes % 4 || calls < 2000) {
        fprintf(stderr, "usage: %s BYTES (4..%d, a multiple of 4) [CALLS >= 2000]\n", argv[0], MAX_BYTES);
        return 2;
    }
    struct board *b = mmap(NULL, 2 * sizeof *b, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (b == MAP_FAILED) return perror("mmap"), 1;
    memset(b, 0, 2 * sizeof *b);
    const int me = fork() == 0 ? 1 : 0;
    cpu_set_t cs;
    CPU_ZERO(&cs);
    CPU_SET(me, &cs);
    sched_setaffinity(0, sizeof cs, &cs);
    const size_t n = bytes / 4;
    float *in = aligned_alloc(64, bytes), *out = aligned_alloc(64, bytes);
    for (size_t i = 0; i < n; ++i) in[i] = (float)(i + me);
    double t0 = 0;
    for (unsigned long s = 1; s <= (unsigned long)calls; ++s) {
        if (s == 1000) t0 = now();  /* after a warm-up */
        memcpy(b[me].slots[s & 1], in, bytes);
        atomic_store_explicit(&b[me].published, s, memory_order_release);
        while (atomic_load_explicit(&b[1 - me].published, memory_order_acquire) < s) {
        }
        const float *x = (const float *)b[0].slots[s & 1], *y = (const float *)b[1].slots[s & 1];
        for (size_t i = 0; i < n; ++i) out[i] = x[i] + y[i];
    }
    const double t = now() - t0;
    if (me == 0) {
        wait(NULL);
        printf("%zu bytes: %.2f us per call (check: %g, want %g)\n", bytes, t / (calls - 999) * 1e6, out[n - 1],
               2.0 * (n - 1) + 1);
    }
    return 0;
}
