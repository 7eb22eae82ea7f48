/*
 * nexar_osu_iallreduce: an osu_iallreduce-style overlap benchmark that
 * measures the MPI's own nonblocking allreduce (PMPI_Iallreduce and
 * PMPI_Wait, looked up in the MPI library itself) and the intercepted
 * MPI_Iallreduce + MPI_Wait (nexar, when libnexar_pmpi is preloaded or
 * linked) side by side in one run, alternating at every size.
 *
 * For each size and side, as OSU does:
 *   pure comm  t_pure: MPI_Iallreduce followed at once by MPI_Wait;
 *   overall    t_all:  MPI_Iallreduce, then computation (a spin on the clock,
 *                      no MPI call) for t_pure, then MPI_Wait;
 *   compute    t_cpu:  the computation's own time inside the overall one;
 *   overlap = 100 * (1 - (t_all - t_cpu) / t_pure), at least 0: the share of
 *   the communication hidden behind the computation.
 * Every time is the mean over the iterations of the slowest rank's.
 *
 *   nexar_osu_iallreduce [-m MIN:MAX] [-i N] [-x N] [-c] [-T int|float|double] [--csv FILE]
 *
 * -d cuda: the buffers are cudaMalloc's (the overlap only); the MPI's side
 * is then what a user of an MPI without CUDA support does by hand: copy
 * to host, PMPI_Iallreduce, PMPI_Wait, copy back.  One blocking allreduce
 * comes first (it sets CUDA IPC up for nexar's nonblocking calls).  Exits
 * 77 without a GPU.
 *
 * -c: nexar's result at each size must be exactly MPI's (inputs are small
 * integers); the program exits 1 where it is not.  With --persistent: one
 * MPI_Start + MPI_Wait of nexar's persistent allreduce per size.
 *
 * --persistent [-r N] instead: for each size, the mean time of a blocking
 * allreduce and of MPI_Start + MPI_Wait of a persistent one (initialized
 * once), the MPI's own (PMPI_Allreduce; PMPI_Allreduce_init or Open MPI 4's
 * PMPIX_Allreduce_init) and nexar's (MPI_Allreduce; MPI_Allreduce_init or
 * MPIX_Allreduce_init), and nexar's MPI_Iallreduce waited on at once, the
 * best of N alternating repetitions (default 5, at most 64); and the median
 * and range over the repetitions of nexar's blocking time over its
 * persistent time, each ratio of two times measured next to each other
 * (steadier than a ratio of two bests on a noisy machine).
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../test/gpu/cudart_loader.h"
#include "../test/own_mpi.h"
#include "parse_bytes.h"

static __typeof__(&PMPI_Iallreduce) own_iallreduce;
static __typeof__(&PMPI_Wait) own_wait;
static __typeof__(&PMPI_Allreduce) own_allreduce;

static void spin(double seconds) {
    double t0 = MPI_Wtime();
    while (MPI_Wtime() - t0 < seconds) {
    }
}

/* -d cuda: the buffers are cudaMalloc's.  The MPI's side is then what a
 * user of an MPI without CUDA support does by hand: the input copied to
 * host memory, PMPI_Iallreduce there, and after PMPI_Wait the result
 * copied back to the device. */
static int on_device;
static cudart_t cuda;
static char *host_s, *host_r; /* the MPI side's host copies */
static size_t call_bytes;

static void start(int mpi, const void *s, void *r, int count, MPI_Datatype dt, MPI_Request *req) {
    if (mpi && on_device) {
        cuda.Memcpy(host_s, s, call_bytes, 4);
        own_iallreduce(host_s, host_r, count, dt, MPI_SUM, MPI_COMM_WORLD, req);
    } else if (mpi) {
        own_iallreduce(s, r, count, dt, MPI_SUM, MPI_COMM_WORLD, req);
    } else {
        MPI_Iallreduce(s, r, count, dt, MPI_SUM, MPI_COMM_WORLD, req);
    }
}

static void finish(int mpi, void *r, MPI_Request *req) {
    if (mpi) own_wait(req, MPI_STATUS_IGNORE);
    else MPI_Wait(req, MPI_STATUS_IGNORE);
    if (mpi && on_device) cuda.Memcpy(r, host_r, call_bytes, 4);
}

/* The slowest rank's mean. */
static double slowest(double t) {
    double m = 0;
    own_allreduce(&t, &m, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return m;
}

/* Pure communication, then the overall and compute times with `compute` seconds of it. */
static void measure(int mpi, const void *s, void *r, int count, MPI_Datatype dt, int iters, int warmup,
                    double compute, double *t_pure, double *t_all, double *t_cpu) {
    MPI_Request req;
    for (int i = 0; i < warmup; ++i) start(mpi, s, r, count, dt, &req), finish(mpi, r, &req);
    PMPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i) start(mpi, s, r, count, dt, &req), finish(mpi, r, &req);
    *t_pure = slowest((MPI_Wtime() - t0) / iters);
    if (compute < 0) compute = *t_pure;
    /* As OSU: the first `warmup` rounds with computation are not timed either. */
    double all = 0, cpu = 0;
    for (int i = 0; i < warmup + iters; ++i) {
        PMPI_Barrier(MPI_COMM_WORLD);
        double a = MPI_Wtime();
        start(mpi, s, r, count, dt, &req);
        double c = MPI_Wtime();
        spin(compute);
        double spun = MPI_Wtime() - c;
        finish(mpi, r, &req);
        if (i < warmup) continue;
        cpu += spun;
        all += MPI_Wtime() - a;
    }
    *t_all = slowest(all / iters);
    *t_cpu = slowest(cpu / iters);
}

/* --persistent: mean time of a blocking allreduce (MPI's own or nexar's),
 * or of Start + Wait of a persistent one made once (MPI's own where it has
 * them, or nexar's); alternating per size, the slowest rank's mean. */
typedef int (*init_fn)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm, MPI_Info, MPI_Request *);
typedef int (*start_fn)(MPI_Request *);
static init_fn own_init, nexar_init;
static start_fn own_start;

static double time_blocking(int mpi, const void *s, void *r, int count, MPI_Datatype dt, int iters, int warmup) {
    for (int i = 0; i < warmup; ++i) {
        if (mpi) own_allreduce(s, r, count, dt, MPI_SUM, MPI_COMM_WORLD);
        else MPI_Allreduce(s, r, count, dt, MPI_SUM, MPI_COMM_WORLD);
    }
    PMPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i) {
        if (mpi) own_allreduce(s, r, count, dt, MPI_SUM, MPI_COMM_WORLD);
        else MPI_Allreduce(s, r, count, dt, MPI_SUM, MPI_COMM_WORLD);
    }
    return slowest((MPI_Wtime() - t0) / iters);
}

static double time_persistent(int mpi, const void *s, void *r, int count, MPI_Datatype dt, int iters, int warmup) {
    init_fn init = mpi ? own_init : nexar_init;
    if (!init) return 0;
    MPI_Request req;
    if (init(s, r, count, dt, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &req) != MPI_SUCCESS) return 0;
    for (int i = 0; i < warmup; ++i) {
        if (mpi) own_start(&req), own_wait(&req, MPI_STATUS_IGNORE);
        else MPI_Start(&req), MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    PMPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i) {
        if (mpi) own_start(&req), own_wait(&req, MPI_STATUS_IGNORE);
        else MPI_Start(&req), MPI_Wait(&req, MPI_STATUS_IGNORE);
    }
    double t = slowest((MPI_Wtime() - t0) / iters);
    MPI_Request_free(&req);
    return t;
}

/* Start + Wait of a nonblocking allreduce, waited on at once. */
static double time_nonblocking(int mpi, const void *s, void *r, int count, MPI_Datatype dt, int iters, int warmup) {
    MPI_Request req;
    for (int i = 0; i < warmup; ++i) start(mpi, s, r, count, dt, &req), finish(mpi, r, &req);
    PMPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i) start(mpi, s, r, count, dt, &req), finish(mpi, r, &req);
    return slowest((MPI_Wtime() - t0) / iters);
}

static int compare_doubles(const void *a, const void *b) {
    const double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* -c with --persistent: one Start + Wait of nexar's persistent allreduce
 * of `count` items, exactly the MPI's PMPI_Allreduce of the same input
 * (`check`: scratch).  Returns 1 where it differs on some rank. */
static int persistent_differs(const char *s, char *r, int count, MPI_Datatype dt, size_t esz, char *check) {
    MPI_Request req;
    int bad = 0, any = 0;
    own_allreduce(s, check, count, dt, MPI_SUM, MPI_COMM_WORLD);
    memset(r, 0, (size_t)count * esz);
    if (!nexar_init || nexar_init(s, r, count, dt, MPI_SUM, MPI_COMM_WORLD, MPI_INFO_NULL, &req) != MPI_SUCCESS) return 1;
    MPI_Start(&req);
    MPI_Wait(&req, MPI_STATUS_IGNORE);
    MPI_Request_free(&req);
    bad = memcmp(check, r, (size_t)count * esz) != 0;
    own_allreduce(&bad, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return any;
}

static long persistent_table(size_t min, size_t max, MPI_Datatype dt, size_t esz, int iters, int reps, int rank,
                             FILE *csv, char *s, char *r, char *check) {
    long mismatches = 0;
    if (rank == 0) {
        printf("# persistent and nonblocking against blocking: mean us per call, best of %d alternating "
               "repetitions;\n# MPI = the MPI's own PMPI_Allreduce / its persistent allreduce%s; nexar = "
               "MPI_Allreduce / MPI_Iallreduce + MPI_Wait at once / nexar's persistent allreduce (Start + Wait);\n"
               "# MPI nonbl: the MPI's own PMPI_Iallreduce + PMPI_Wait at once;\n"
               "# nonbl/blk: nonblocking time over blocking (1 = as fast); pers/block, vs MPI: speedups\n",
               reps, own_init ? "" : " (none in this MPI)");
        printf("# pers/blk med: the median over the repetitions of each one's blocking / persistent time "
               "(a ratio of times measured side by side), with its range\n");
        printf("# %-10s %12s %12s %12s %12s %12s %12s %10s %10s %10s %20s\n", "Size", "MPI block", "MPI persist",
               "MPI nonbl", "nexar block", "nexar nonbl", "nexar pers", "nonbl/blk", "pers/block", "vs MPI",
               "pers/blk med [range]");
        if (csv) fprintf(csv, "size_bytes,mpi_blocking_us,mpi_persistent_us,nexar_blocking_us,nexar_nonblocking_us,"
                              "nexar_persistent_us,nexar_nonblocking_over_blocking,"
                              "nexar_persistent_speedup_over_blocking,nexar_persistent_speedup_over_best_mpi,"
                              "nexar_persistent_speedup_median,nexar_persistent_speedup_min,"
                              "nexar_persistent_speedup_max,mpi_nonblocking_us\n");
    }
    for (size_t bytes = min; bytes <= max; bytes *= 2) {
        int count = (int)(bytes / esz);
        int it = iters > 0 ? iters : bytes >= (1u << 20) ? 100 : 1000;
        /* MPI blocking, MPI persistent, nexar blocking, nexar nonblocking, nexar persistent, MPI nonblocking */
        double t[6] = {1e30, 1e30, 1e30, 1e30, 1e30, 1e30};
        double ratio[64];  /* per repetition: nexar's blocking time / its persistent time */
        int n_ratios = 0;
        for (int rep = 0; rep < reps; ++rep) {
            double x, blocking = 0, persistent = 0;
            if ((x = time_blocking(1, s, r, count, dt, it, it / 10)) < t[0]) t[0] = x;
            if ((x = time_persistent(1, s, r, count, dt, it, it / 10)) < t[1]) t[1] = x;
            if ((x = blocking = time_blocking(0, s, r, count, dt, it, it / 10)) < t[2]) t[2] = x;
            if ((x = time_nonblocking(0, s, r, count, dt, it, it / 10)) < t[3]) t[3] = x;
            if ((x = persistent = time_persistent(0, s, r, count, dt, it, it / 10)) < t[4]) t[4] = x;
            if ((x = time_nonblocking(1, s, r, count, dt, it, it / 10)) < t[5]) t[5] = x;
            if (persistent > 0 && n_ratios < 64) ratio[n_ratios++] = blocking / persistent;
        }
        double best_mpi = t[1] > 0 && t[1] < t[0] ? t[1] : t[0];
        qsort(ratio, (size_t)n_ratios, sizeof *ratio, compare_doubles);
        const double med = n_ratios ? (n_ratios % 2 ? ratio[n_ratios / 2] : (ratio[n_ratios / 2 - 1] + ratio[n_ratios / 2]) / 2) : 0;
        const double lo = n_ratios ? ratio[0] : 0, hi = n_ratios ? ratio[n_ratios - 1] : 0;
        const int differs = check && persistent_differs(s, r, count, dt, esz, check);
        mismatches += differs;
        if (rank == 0 && differs) printf("# -c: at %zu bytes nexar's persistent result DIFFERS from MPI's\n", bytes);
        if (rank == 0) {
            printf("  %-10zu %12.2f %12.2f %12.2f %12.2f %12.2f %12.2f %9.2fx %9.2fx %9.2fx %7.2fx [%.2f, %.2f]\n",
                   bytes, t[0] * 1e6, t[1] * 1e6, t[5] * 1e6, t[2] * 1e6, t[3] * 1e6, t[4] * 1e6, t[3] / t[2],
                   t[2] / t[4], best_mpi / t[4], med, lo, hi);
            if (csv)
                fprintf(csv, "%zu,%.3f,%.3f,%.3f,%.3f,%.3f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.3f\n", bytes, t[0] * 1e6,
                        t[1] * 1e6, t[2] * 1e6, t[3] * 1e6, t[4] * 1e6, t[3] / t[2], t[2] / t[4], best_mpi / t[4], med,
                        lo, hi, t[5] * 1e6);
            fflush(stdout);
        }
    }
    return mismatches;
}

static double overlap(double t_pure, double t_all, double t_cpu) {
    double o = 100.0 * (1.0 - (t_all - t_cpu) / t_pure);
    return o < 0 ? 0 : o > 100 ? 100 : o;
}

int main(int argc, char **argv) {
    size_t min = 1 << 20, max = 16u << 20;
    int iters = -1, warmup = -1, persistent = 0, reps = 5, validate = 0;
    const char *type = "float", *csv_path = NULL;
    MPI_Init(&argc, &argv);
    own_iallreduce = own_mpi(PMPI_Iallreduce);
    own_wait = own_mpi(PMPI_Wait);
    own_allreduce = own_mpi(PMPI_Allreduce);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc) {
            if (!parse_range(argv[++i], &min, &max)) {
                if (rank == 0) fprintf(stderr, "nexar_osu_iallreduce: -m takes MIN:MAX in bytes (K, M, G allowed)\n");
                MPI_Finalize();
                return 2;
            }
        } else if (!strcmp(argv[i], "-i") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-x") && i + 1 < argc) warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-T") && i + 1 < argc) type = argv[++i];
        else if (!strcmp(argv[i], "--csv") && i + 1 < argc) csv_path = argv[++i];
        else if (!strcmp(argv[i], "--persistent")) persistent = 1;
        else if (!strcmp(argv[i], "-c")) validate = 1;
        else if (!strcmp(argv[i], "-d") && i + 1 < argc && !strcmp(argv[i + 1], "cuda")) on_device = 1, ++i;
        else if (!strcmp(argv[i], "-r") && i + 1 < argc) reps = atoi(argv[++i]), reps = reps < 1 ? 1 : reps > 64 ? 64 : reps;
        else {
            if (rank == 0)
                fprintf(stderr, "usage: %s [-m MIN:MAX] [-i N] [-x N] [-c] [-T int|float|double] [-d cuda] [--persistent [-r N]] [--csv FILE]\n",
                        argv[0]);
            MPI_Finalize();
            return 2;
        }
    }
    MPI_Datatype dt = !strcmp(type, "int") ? MPI_INT : !strcmp(type, "double") ? MPI_DOUBLE : MPI_FLOAT;
    size_t esz = dt == MPI_DOUBLE ? 8 : 4;
    if (min < esz) min = esz;
    int intercepted = dlsym(RTLD_DEFAULT, "nexar_get_counter") != NULL;
    if (on_device && persistent) {
        if (rank == 0) fprintf(stderr, "nexar_osu_iallreduce: -d cuda measures the overlap only\n");
        MPI_Finalize();
        return 2;
    }
    if (on_device) {
        char why[256];
        int have = cudart_load(&cuda, why, sizeof why) == 0, all = 0, ndev = 1;
        own_allreduce(&have, &all, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        if (!all) {
            if (rank == 0) fprintf(stderr, "nexar_osu_iallreduce: -d cuda: %s\n", have ? "a rank has no GPU" : why);
            MPI_Finalize();
            return 77;
        }
        cuda.GetDeviceCount(&ndev);
        cuda.SetDevice(rank % ndev);
    }
    /* Small integers in every type: sums are exact, so -c compares exactly. */
    char *host_in = malloc(max), *s = NULL, *r = NULL;
    if (on_device) {
        host_s = malloc(max), host_r = malloc(max);
        if (cuda.Malloc((void **)&s, max) != 0 || cuda.Malloc((void **)&r, max) != 0) s = r = NULL;
    } else {
        s = malloc(max), r = malloc(max);
    }
    if (!s || !r || !host_in || (on_device && (!host_s || !host_r))) {
        fprintf(stderr, "rank %d: cannot allocate %zu bytes%s\n", rank, max, on_device ? " (on the GPU)" : "");
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    for (size_t i = 0; i < max / esz; ++i) {
        const int v = (int)((i * 7 + (size_t)rank * 13) % 101) - 50;
        if (dt == MPI_INT) ((int *)host_in)[i] = v;
        else if (dt == MPI_DOUBLE) ((double *)host_in)[i] = v;
        else ((float *)host_in)[i] = (float)v;
    }
    if (on_device) {
        cuda.Memcpy(s, host_in, max, 4);
        memset(host_in, 0, max);
        cuda.Memcpy(r, host_in, max, 4);
    } else {
        memcpy(s, host_in, max);
        memset(r, 0, max);
    }
    char *check = validate ? malloc(max) : NULL;
    long mismatches = 0;
    FILE *csv = rank == 0 && csv_path ? fopen(csv_path, "w") : NULL;
    if (persistent) {
        own_start = (start_fn)own_mpi_symbol("PMPI_Start");
        own_init = (init_fn)own_mpi_symbol_if_any("PMPI_Allreduce_init");
        if (!own_init) own_init = (init_fn)own_mpi_symbol_if_any("PMPIX_Allreduce_init");
        /* nexar's (or the MPI's, without nexar) as the program would call it. */
        nexar_init = (init_fn)dlsym(RTLD_DEFAULT, "MPI_Allreduce_init");
        if (!nexar_init) nexar_init = (init_fn)dlsym(RTLD_DEFAULT, "MPIX_Allreduce_init");
        if (rank == 0)
            printf("# nexar persistent collectives: %d ranks, %s%s\n", size, type,
                   intercepted ? "" : " (WARNING: libnexar_pmpi is not loaded, both columns are MPI)");
        const long persistent_mismatches = persistent_table(min, max, dt, esz, iters, reps, rank, csv, s, r, check);
        if (rank == 0 && check)
            printf("# -c: %s\n", persistent_mismatches ? "nexar's persistent results DIFFER from MPI's"
                                                        : "every size's persistent result is MPI's");
        if (csv) fclose(csv);
        free(check);
        free(host_in);
        free(s);
        free(r);
        MPI_Finalize();
        return persistent_mismatches ? 1 : 0;
    }
    /* Device buffers: one blocking allreduce first, as a program's first
     * blocking call of device buffers sets CUDA IPC up on the communicator
     * (nexar's nonblocking calls take it from then on). */
    if (on_device) MPI_Allreduce(s, r, (int)(max / esz), dt, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) {
        printf("# nexar osu_iallreduce-style overlap: %d ranks, %s, out of place; MPI = the MPI's own "
               "PMPI_Iallreduce + PMPI_Wait%s, nexar = MPI_Iallreduce + MPI_Wait%s%s\n",
               size, type, on_device ? " between cudaMemcpy to host and back" : "",
               on_device ? " on the device buffers" : "",
               intercepted ? "" : " (WARNING: libnexar_pmpi is not loaded, both columns are MPI)");
        printf("# computation = a spin on the clock for the side's pure communication time, no MPI call in it;\n"
               "# overlap = 100 (1 - (overall - compute) / pure comm); times in us, slowest rank's mean\n");
        printf("# %-10s %10s %10s %10s %8s   %10s %10s %10s %8s\n", "Size", "MPI all", "MPI cpu", "MPI comm",
               "MPI ovl%", "nexar all", "nexar cpu", "nexar comm", "nx ovl%");
        if (csv) fprintf(csv, "size_bytes,ranks,mpi_overall_us,mpi_compute_us,mpi_comm_us,mpi_overlap_pct,"
                              "nexar_overall_us,nexar_compute_us,nexar_comm_us,nexar_overlap_pct\n");
        fflush(stdout);
    }
    for (size_t bytes = min; bytes <= max; bytes *= 2) {
        int count = (int)(bytes / esz);
        int it = iters > 0 ? iters : bytes >= (8u << 20) ? 20 : bytes >= (1u << 20) ? 50 : 200;
        int wu = warmup >= 0 ? warmup : it / 5 + 1;
        double m[3], n[3];
        call_bytes = bytes;
        measure(1, s, r, count, dt, it, wu, -1, &m[0], &m[1], &m[2]);
        if (check && on_device) cuda.Memcpy(check, r, bytes, 4);
        else if (check) memcpy(check, r, bytes);
        measure(0, s, r, count, dt, it, wu, -1, &n[0], &n[1], &n[2]);
        if (check && on_device) cuda.Memcpy(host_in, r, bytes, 4);
        if (check && memcmp(check, on_device ? host_in : r, bytes) != 0) {
            ++mismatches;
            fprintf(stderr, "nexar_osu_iallreduce: rank %d: at %zu bytes nexar's result differs from MPI's\n", rank,
                    bytes);
        }
        if (rank == 0) {
            printf("  %-10zu %10.1f %10.1f %10.1f %8.1f   %10.1f %10.1f %10.1f %8.1f\n", bytes, m[1] * 1e6,
                   m[2] * 1e6, m[0] * 1e6, overlap(m[0], m[1], m[2]), n[1] * 1e6, n[2] * 1e6, n[0] * 1e6,
                   overlap(n[0], n[1], n[2]));
            if (csv)
                fprintf(csv, "%zu,%d,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f\n", bytes, size, m[1] * 1e6, m[2] * 1e6,
                        m[0] * 1e6, overlap(m[0], m[1], m[2]), n[1] * 1e6, n[2] * 1e6, n[0] * 1e6,
                        overlap(n[0], n[1], n[2]));
            fflush(stdout);
        }
    }
    if (csv) fclose(csv);
    long all_mismatches = 0;
    own_allreduce(&mismatches, &all_mismatches, 1, MPI_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0 && check) printf("# -c: %s\n", all_mismatches ? "nexar's results DIFFER from MPI's" : "every size's result is MPI's");
    free(check);
    free(host_in);
    if (on_device) {
        cuda.Free(s), cuda.Free(r);
        free(host_s), free(host_r);
    } else {
        free(s), free(r);
    }
    MPI_Finalize();
    return all_mismatches ? 1 : 0;
}
