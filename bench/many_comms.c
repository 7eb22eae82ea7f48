/*
 * nexar_many_comms: what many live communicators cost.  Dups MPI_COMM_WORLD
 * N times and runs one large allreduce on each, keeping them all alive, then
 * reports per rank the file descriptors and resident memory added, and the
 * time of a dup plus its first large allreduce.  A plain MPI program: run it
 * with and without libnexar_pmpi preloaded to compare (bench/nexar-comms).
 * Every result is checked.
 *
 *   nexar_many_comms [-n COMMS] [-s BYTES] [--rounds R] [--free]
 *
 * --rounds R: after the first call on each, R-1 more rounds of one call on
 * every communicator in turn (communicators that went idle meanwhile).
 * --free frees every communicator at the end and reports what is left
 * (the churn case: resources must come back).
 * Exit status 0 when every result was right.
 */
#include <dirent.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int count_fds(void) {
    DIR *d = opendir("/proc/self/fd");
    if (!d) return -1;
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        if (e->d_name[0] != '.') ++n;
    closedir(d);
    return n - 1; /* the directory's own descriptor */
}

static long rss_kib(void) {
    FILE *f = fopen("/proc/self/status", "r");
    if (!f) return -1;
    char line[256];
    long kib = -1;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "VmRSS: %ld kB", &kib) == 1) break;
    fclose(f);
    return kib;
}

int main(int argc, char **argv) {
    int ncomms = 50, do_free = 0, rounds = 1;
    size_t bytes = 16u << 20;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "-n") && i + 1 < argc) ncomms = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-s") && i + 1 < argc) bytes = strtoull(argv[++i], NULL, 0);
        else if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--free")) do_free = 1;
    }
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    size_t n = bytes / sizeof(float);
    float *a = malloc(n * sizeof(float)), *b = malloc(n * sizeof(float));
    for (size_t i = 0; i < n; ++i) a[i] = (float)(i % 7 + rank);
    /* Warm up MPI itself (and nexar's start-up) on the world communicator. */
    MPI_Allreduce(a, b, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    MPI_Barrier(MPI_COMM_WORLD);
    int fds0 = count_fds();
    long rss0 = rss_kib();
    MPI_Comm *comms = malloc(sizeof(MPI_Comm) * (size_t)ncomms);
    int bad = 0;
    double t0 = MPI_Wtime();
    double per = 0;
    for (int round = 0; round < rounds; ++round) {
        for (int c = 0; c < ncomms; ++c) {
            if (round == 0) MPI_Comm_dup(MPI_COMM_WORLD, &comms[c]);
            memset(b, 0, n * sizeof(float));
            MPI_Allreduce(a, b, (int)n, MPI_FLOAT, MPI_SUM, comms[c]);
            for (size_t i = 0; i < n; i += 4099) {
                float want = 0;
                for (int r = 0; r < size; ++r) want += (float)(i % 7 + r);
                if (b[i] != want) { ++bad; break; }
            }
        }
        if (round == 0) per = (MPI_Wtime() - t0) / ncomms;
    }
    int fds1 = count_fds();
    long rss1 = rss_kib();
    int fds2 = fds1;
    long rss2 = rss1;
    if (do_free) {
        for (int c = 0; c < ncomms; ++c) MPI_Comm_free(&comms[c]);
        fds2 = count_fds();
        rss2 = rss_kib();
    }
    int total_bad = 0;
    MPI_Allreduce(&bad, &total_bad, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    /* One write per line: a launcher that forwards output in pieces (MPICH's
     * Hydra) would otherwise interleave the ranks' lines. */
    char after_free[96] = "";
    if (do_free) snprintf(after_free, sizeof after_free, " after_free_fds=%d after_free_rss_mib=%.1f", fds2 - fds0,
                          (rss2 - rss0) / 1024.0);
    printf("many_comms: rank %d: comms=%d bytes=%zu extra_fds=%d extra_rss_mib=%.1f dup_and_first_ms=%.2f%s wrong=%d\n",
           rank, ncomms, bytes, fds1 - fds0, (rss1 - rss0) / 1024.0, per * 1e3, after_free, bad);
    fflush(stdout);
    MPI_Finalize();
    free(comms);
    free(a);
    free(b);
    return total_bad ? 1 : 0;
}
