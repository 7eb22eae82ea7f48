/*
 * nexar_osu_allreduce: an osu_allreduce-style benchmark that measures the real
 * MPI (PMPI_Allreduce) and the intercepted MPI_Allreduce (nexar, when the
 * library is preloaded or linked) side by side in one run, interleaved at
 * every size.  It knows nothing of nexar at build time; bench/nexar-osu runs
 * it with LD_PRELOAD.
 *
 * Options (as OSU's where they exist):
 *   -m MIN:MAX   message sizes in bytes (powers of two from MIN to MAX)
 *   -i N         timed iterations per size (default: 100, fewer for large sizes)
 *   -x N         warm-up iterations per size (default: 10, fewer for large sizes)
 *   -c           validate every result against the other side's
 *   -l           in place (MPI_IN_PLACE)
 *   -T TYPE      int | float | double (default float)
 *   --csv FILE   also write the table as CSV
 *
 * busbw = size / t * 2(n-1)/n, the bytes each rank's links carry in a ring.
 */
#include <dlfcn.h>
#include <mpi.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint64_t ring_calls, ring_bytes, passthrough_calls, fallback_calls;
} stats_t;
typedef int (*get_stats_fn)(stats_t *);

static double run(int use_pmpi, const void *s, void *r, int count, MPI_Datatype dt, int iters, int warmup) {
    int (*fn)(const void *, void *, int, MPI_Datatype, MPI_Op, MPI_Comm) = use_pmpi ? PMPI_Allreduce : MPI_Allreduce;
    for (int i = 0; i < warmup; ++i) fn(s, r, count, dt, MPI_SUM, MPI_COMM_WORLD);
    PMPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i) fn(s, r, count, dt, MPI_SUM, MPI_COMM_WORLD);
    double t = (MPI_Wtime() - t0) / iters, tmax = 0;
    /* The slowest rank's average, as the collective finishes with it. */
    PMPI_Allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return tmax;
}

static void fill(void *buf, size_t n, MPI_Datatype dt, int rank) {
    for (size_t i = 0; i < n; ++i) {
        int v = (int)((i * 7 + (size_t)rank * 3) % 17) - 8; /* exact in any order */
        if (dt == MPI_INT) ((int *)buf)[i] = v;
        else if (dt == MPI_FLOAT) ((float *)buf)[i] = (float)v;
        else ((double *)buf)[i] = v;
    }
}

int main(int argc, char **argv) {
    size_t min = 1 << 20, max = 256u << 20;
    int iters = -1, warmup = -1, validate = 0, in_place = 0;
    const char *type = "float", *csv_path = NULL;
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc) {
            char *colon = strchr(argv[++i], ':');
            if (colon) { min = strtoull(argv[i], NULL, 10); max = strtoull(colon + 1, NULL, 10); }
            else max = strtoull(argv[i], NULL, 10);
        } else if (!strcmp(argv[i], "-i") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-x") && i + 1 < argc) warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-c")) validate = 1;
        else if (!strcmp(argv[i], "-l")) in_place = 1;
        else if (!strcmp(argv[i], "-T") && i + 1 < argc) type = argv[++i];
        else if (!strcmp(argv[i], "--csv") && i + 1 < argc) csv_path = argv[++i];
        else {
            if (rank == 0) fprintf(stderr, "usage: %s [-m MIN:MAX] [-i N] [-x N] [-c] [-l] [-T int|float|double] [--csv FILE]\n", argv[0]);
            MPI_Finalize();
            return 2;
        }
    }
    MPI_Datatype dt = !strcmp(type, "int") ? MPI_INT : !strcmp(type, "double") ? MPI_DOUBLE : MPI_FLOAT;
    size_t esz = dt == MPI_DOUBLE ? 8 : 4;
    if (min < esz) min = esz;

    get_stats_fn get_stats = (get_stats_fn)dlsym(RTLD_DEFAULT, "nexar_get_stats");
    int intercepted = get_stats != NULL;
    FILE *csv = (rank == 0 && csv_path) ? fopen(csv_path, "w") : NULL;
    if (rank == 0) {
        printf("# nexar osu-style allreduce: %d ranks, %s, %s, MPI = PMPI_Allreduce, nexar = MPI_Allreduce%s\n", size,
               type, in_place ? "in place" : "out of place",
               intercepted ? "" : " (WARNING: libnexar_pmpi is not loaded, both columns are MPI)");
        printf("# MALLOC_MMAP_THRESHOLD_=%s\n", getenv("MALLOC_MMAP_THRESHOLD_") ? getenv("MALLOC_MMAP_THRESHOLD_") : "(glibc default)");
        printf("# %-12s %16s %12s %16s %12s %9s %7s\n", "Size", "MPI Avg(us)", "MPI busbw", "nexar Avg(us)",
               "nexar busbw", "speedup", "ring");
        printf("# %-12s %16s %12s %16s %12s %9s %7s\n", "(bytes)", "", "(GB/s)", "", "(GB/s)", "", "calls");
        if (csv) fprintf(csv, "size_bytes,ranks,mpi_avg_us,mpi_busbw_gbs,nexar_avg_us,nexar_busbw_gbs,speedup,ring_calls\n");
        fflush(stdout);
    }
    char *sbuf = malloc(max), *rbuf = malloc(max), *check = validate ? malloc(max) : NULL;
    if (!sbuf || !rbuf || (validate && !check)) {
        fprintf(stderr, "rank %d: cannot allocate %zu bytes\n", rank, max);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    int bad = 0;
    for (size_t bytes = min; bytes <= max; bytes *= 2) {
        int count = (int)(bytes / esz);
        int it = iters > 0 ? iters : bytes >= (64u << 20) ? 10 : bytes >= (8u << 20) ? 20 : 100;
        int wu = warmup >= 0 ? warmup : bytes >= (64u << 20) ? 2 : 5;
        fill(sbuf, (size_t)count, dt, rank);
        memcpy(rbuf, sbuf, bytes);
        const void *s = in_place ? MPI_IN_PLACE : sbuf;
        stats_t before = {0}, after = {0};
        /* Interleave: MPI, nexar, MPI, nexar; keep each side's best average. */
        double t_mpi = 1e30, t_nx = 1e30;
        for (int rep = 0; rep < 2; ++rep) {
            double t = run(1, s, rbuf, count, dt, it, wu);
            if (t < t_mpi) t_mpi = t;
            if (get_stats) get_stats(&before);
            t = run(0, s, rbuf, count, dt, it, wu);
            if (get_stats) get_stats(&after);
            if (t < t_nx) t_nx = t;
        }
        if (validate) {
            fill(sbuf, (size_t)count, dt, rank);
            memcpy(rbuf, sbuf, bytes);
            memcpy(check, sbuf, bytes);
            PMPI_Allreduce(in_place ? MPI_IN_PLACE : sbuf, check, count, dt, MPI_SUM, MPI_COMM_WORLD);
            MPI_Allreduce(s, rbuf, count, dt, MPI_SUM, MPI_COMM_WORLD);
            if (memcmp(check, rbuf, bytes)) bad = 1;
        }
        double factor = 2.0 * (size - 1) / size;
        double bw_mpi = bytes / t_mpi * factor / 1e9, bw_nx = bytes / t_nx * factor / 1e9;
        unsigned long long ring = after.ring_calls - before.ring_calls;
        if (rank == 0) {
            printf("%-14zu %16.2f %12.3f %16.2f %12.3f %8.2fx %7llu%s\n", bytes, t_mpi * 1e6, bw_mpi, t_nx * 1e6,
                   bw_nx, t_mpi / t_nx, ring, validate ? (bad ? "  VALIDATION FAILED" : "  ok") : "");
            if (csv) fprintf(csv, "%zu,%d,%.3f,%.4f,%.3f,%.4f,%.4f,%llu\n", bytes, size, t_mpi * 1e6, bw_mpi,
                             t_nx * 1e6, bw_nx, t_mpi / t_nx, ring);
            fflush(stdout);
        }
    }
    if (csv) fclose(csv);
    int any_bad = 0;
    PMPI_Allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && validate) printf("# validation: %s\n", any_bad ? "FAILED" : "all sizes match PMPI_Allreduce");
    free(sbuf); free(rbuf); free(check);
    MPI_Finalize();
    return any_bad;
}
