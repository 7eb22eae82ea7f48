/*
 * nexar_osu_allreduce: an osu_allreduce-style benchmark that measures the real
 * MPI (PMPI_Allreduce) and the intercepted MPI_Allreduce (nexar, when the
 * library is preloaded or linked) side by side in one run, interleaved at
 * every size.  It knows nothing of nexar at build time; bench/nexar-osu runs
 * it with LD_PRELOAD.
 *
 * Options (as OSU's where they exist):
 *   -m MIN:MAX   message sizes in bytes, K/M/G allowed (powers of two from MIN to MAX)
 *   -i N         timed iterations per size (default: 100, fewer for large sizes)
 *   -x N         warm-up iterations per size (default: 10, fewer for large sizes)
 *   -c           validate every result against the other side's
 *   -l           in place (MPI_IN_PLACE)
 *   -T TYPE      int | float | double (default float)
 *   -d cuda      device buffers (cudaMalloc).  The MPI column is then what a
 *                user does without a CUDA-aware MPI: copy to host,
 *                PMPI_Allreduce, copy back.  The nexar column passes the
 *                device buffers to MPI_Allreduce.
 *   -r N         interleaved repetitions per size, best kept (default 2)
 *   --collective allreduce | reduce_scatter | allgather (host buffers)
 *                which collective (default allreduce): MPI_Reduce_scatter_block
 *                or MPI_Allgather, the size being the whole vector S (each
 *                rank's block is S/n)
 *   --overhead   interposition cost instead: for each (small) size, N
 *                repetitions (default 30) of MPI_Allreduce and
 *                PMPI_Allreduce alternating, the best average of each, and
 *                the difference in ns per call and in percent
 *   --thp        host buffers on transparent huge pages, as numpy and PyTorch
 *                put their large arrays: 2 MiB-aligned and madvise(MADV_HUGEPAGE).
 *                The header says how much of them really got huge pages
 *                (AnonHugePages in /proc/self/smaps, the least over ranks)
 *   --node-bound also the bound with every rank copying at once (below)
 *   --floor      also the exchange floor of a small allreduce (below)
 *   --csv FILE   also write the table as CSV
 *   --plot FILE  draw busbw against size (MPI, nexar, the bound) with gnuplot
 *
 * The exchange floor (--floor; allreduce of host buffers, every rank on
 * one node): per call, exactly a one-shot allreduce's work with nothing of
 * MPI or nexar around it, timed in the same repetitions as the two sides:
 * each rank copies its input into its slot of a shared window
 * (MPI_Win_allocate_shared), publishes the call's number, waits for every
 * other rank's, and sums every slot into its result (floats, rank order).
 * No design that moves the inputs between processes through memory does a
 * call in less (bench/one_shot_bound.c is the same, without MPI);
 * "nexar % floor" is the floor's time over nexar's.
 *
 * algbw = size / t; busbw = algbw * 2(n-1)/n, the bytes each rank's links
 * carry in a ring (the reduce-scatter and the allgather: algbw * (n-1)/n).
 *
 * The bound (host buffers, one machine): each rank copies its share of the
 * data in twice (reduce-scatter and allgather arrivals) and reduces it once,
 * so t >= S(n-1)/n * (2/Bc + 1/Br), with Bc the single-core memcpy and Br the
 * single-core dst += src bandwidth, both measured here on rank 0 on buffers
 * of the same size.  In busbw terms: bound = 2 / (2/Bc + 1/Br).  Out of
 * place, the first reduction of each chunk reads the send buffer and the
 * arrival and writes the receive buffer, dst = a + b, which moves one more
 * stream (Br3, measured the same way):
 * bound = 2(n-1) / (2(n-1)/Bc + 1/Br3 + (n-2)/Br).
 *
 * That bound is for a design that copies every arrival through memory
 * twice, as slots do (in and out) or a CMA read into place does (the
 * segment is read back from memory after it was reduced).  A design that
 * moves each arriving byte across memory once (nexar's NEXAR_SHM_COPY=push
 * at 2 ranks: the reduce-scatter reads the peer's bytes into cache, the
 * allgather writes them from cache into the peer's buffer, each half a
 * copy) can beat it; its own bound, the "one-pass" bound, is
 * 2(n-1) / ((n-1)/Bc + 1/Br3 + (n-2)/Br), printed in the last column.
 *
 * The reduce-scatter alone: t >= S(n-1)/n * (1/Bc + 1/Brx), every arrival
 * copied in and reduced with the rank's own input, Brx = Br3 out of place
 * (each reduction writes the result beside its two inputs) and Br in place;
 * busbw bound = 1/(1/Bc + 1/Brx), one-pass 1/(1/(2Bc) + 1/Brx).  The
 * allgather alone: t >= S(n-1)/n * 2/Bc for a two-copy design, busbw bound
 * Bc/2, one-pass Bc.
 *
 * The node bound (--node-bound): the same formulas, with Bc, Br and Br3
 * measured by every rank at once on its own buffers (all ranks copying,
 * as in the collective), the slowest rank's rates: the share of the
 * node's memory bandwidth each rank gets when every core moves memory.
 * With many ranks on a node that, not a core's speed, is the limit; the
 * table then also prints node memcpy, the copy rate of all ranks together.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dladdr (test/own_mpi.h) */
#endif
#include <dlfcn.h>
#include <mpi.h>
#include <sys/mman.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../test/gpu/cudart_loader.h"
#include "../test/own_mpi.h"
#include "parse_bytes.h"

typedef struct {
    uint64_t ring_calls, ring_bytes, passthrough_calls, fallback_calls;
} stats_t;
typedef int (*get_stats_fn)(stats_t *);
typedef int (*get_counter_fn)(const char *, uint64_t *);

/* Which path nexar's calls of one size took, from its counters (the
 * "path" column): a bit per path, so that ranks and calls can be compared. */
enum { PATH_MPI = 1, PATH_RING = 2, PATH_ONE_SHOT = 4, PATH_HIER = 8, PATH_FALLBACK = 16 };
typedef struct { uint64_t ring, one_shot, hier, pass, fallback; } path_counts_t;
static get_counter_fn get_counter;
static path_counts_t path_counts(void) {
    path_counts_t c = {0, 0, 0, 0, 0};
    if (!get_counter) return c;
    get_counter("ring_calls", &c.ring);
    get_counter("one_shot_calls", &c.one_shot);  /* (an older nexar has none: stays 0) */
    get_counter("hier_calls", &c.hier);
    get_counter("passthrough_calls", &c.pass);
    get_counter("fallback_calls", &c.fallback);
    return c;
}
static int path_bits(path_counts_t a, path_counts_t b) {
    uint64_t one_shot = b.one_shot - a.one_shot, hier = b.hier - a.hier, ring = b.ring - a.ring;
    int bits = 0;
    if (ring > one_shot + hier) bits |= PATH_RING;
    if (one_shot) bits |= PATH_ONE_SHOT;
    if (hier) bits |= PATH_HIER;
    if (b.pass != a.pass) bits |= PATH_MPI;
    if (b.fallback != a.fallback) bits |= PATH_FALLBACK;
    return bits;
}
/* "ring", "1shot+mpi", ...; "-" without nexar's counters. */
static const char *path_name(int bits, char *buf, size_t len) {
    static const char *const names[] = {"mpi", "ring", "1shot", "hier", "fallbk"};
    if (!get_counter || !bits) return "-";
    buf[0] = 0;
    for (int i = 0; i < 5; ++i)
        if (bits & (1 << i)) snprintf(buf + strlen(buf), len - strlen(buf), "%s%s", buf[0] ? "+" : "", names[i]);
    return buf;
}

static cudart_t cuda;
static int on_device = 0;
enum { ALLREDUCE, REDUCE_SCATTER, ALLGATHER };
static int coll = ALLREDUCE;
static int nranks = 1; /* MPI_COMM_WORLD's size */
static int my_rank = 0;
static const char *const coll_names[] = {"allreduce", "reduce_scatter", "allgather"};
static char *host_stage = NULL; /* -d cuda: the host copy the MPI column reduces */
/* The MPI's own PMPI_* (test/own_mpi.h): nexar defines PMPI_Allreduce too. */
static __typeof__(&PMPI_Allreduce) own_allreduce;
static __typeof__(&PMPI_Reduce_scatter_block) own_reduce_scatter_block;
static __typeof__(&PMPI_Allgather) own_allgather;

/* One call the way the column does it; count is the whole vector's. */
static void one(int use_pmpi, const void *s, void *r, int count, MPI_Datatype dt, size_t bytes) {
    const int block = count / nranks;
    if (coll == REDUCE_SCATTER) {
        if (use_pmpi) own_reduce_scatter_block(s, r, block, dt, MPI_SUM, MPI_COMM_WORLD);
        else MPI_Reduce_scatter_block(s, r, block, dt, MPI_SUM, MPI_COMM_WORLD);
    } else if (coll == ALLGATHER) {
        if (use_pmpi) own_allgather(s, block, dt, r, block, dt, MPI_COMM_WORLD);
        else MPI_Allgather(s, block, dt, r, block, dt, MPI_COMM_WORLD);
    } else if (!use_pmpi) {
        MPI_Allreduce(s, r, count, dt, MPI_SUM, MPI_COMM_WORLD);
    } else if (!on_device) {
        own_allreduce(s, r, count, dt, MPI_SUM, MPI_COMM_WORLD);
    } else {
        cuda.Memcpy(host_stage, s == MPI_IN_PLACE ? r : s, bytes, 4);
        own_allreduce(MPI_IN_PLACE, host_stage, count, dt, MPI_SUM, MPI_COMM_WORLD);
        cuda.Memcpy(r, host_stage, bytes, 4);
    }
}

/* --floor: the ranks' slots in a shared window.  A rank's part: its
 * call number (one cache line), then two slots of `floor_max` bytes, used
 * by calls alternately (a rank writes slot s % 2 again at call s + 2, by
 * when every other rank has published s + 1 and so has read call s). */
static char **floor_parts;  /* by rank; NULL: not measured */
static size_t floor_max;
static float *floor_in, *floor_out;  /* its own buffers: floats, whatever the run's type */
static unsigned long floor_seq;
static MPI_Win floor_win = MPI_WIN_NULL;

static void floor_set_up(size_t max) {
    MPI_Comm node;
    int node_size = 0;
    MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
    MPI_Comm_size(node, &node_size);
    if (node_size != nranks) {  /* ranks on other nodes: no shared window spans them */
        MPI_Comm_free(&node);
        return;
    }
    char *mine = NULL;
    floor_max = max;
    if (MPI_Win_allocate_shared((MPI_Aint)(64 + 2 * max), 64, MPI_INFO_NULL, node, &mine, &floor_win) != MPI_SUCCESS)
        return;
    memset(mine, 0, 64);
    floor_in = malloc(max), floor_out = malloc(max);
    for (size_t i = 0; i < max / sizeof(float); ++i) floor_in[i] = 1.0f;
    floor_parts = calloc((size_t)nranks, sizeof *floor_parts);
    for (int r = 0; r < nranks; ++r) {
        MPI_Aint got = 0;
        int unit = 0;
        MPI_Win_shared_query(floor_win, r, &got, &unit, &floor_parts[r]);
    }
    PMPI_Barrier(MPI_COMM_WORLD);
    MPI_Comm_free(&node);
}

static void floor_call(const float *in, float *out, size_t bytes) {
    const unsigned long s = ++floor_seq;
    const size_t n = bytes / sizeof(float), off = 64 + (s & 1) * floor_max;
    memcpy(floor_parts[my_rank] + off, in, bytes);
    __atomic_store_n((unsigned long *)floor_parts[my_rank], s, __ATOMIC_RELEASE);
    for (int r = 0; r < nranks; ++r)
        while (__atomic_load_n((const unsigned long *)floor_parts[r], __ATOMIC_ACQUIRE) < s) {
        }
    const float *a = (const float *)(floor_parts[0] + off), *b = (const float *)(floor_parts[1] + off);
    for (size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
    for (int r = 2; r < nranks; ++r) {
        const float *x = (const float *)(floor_parts[r] + off);
        for (size_t i = 0; i < n; ++i) out[i] += x[i];
    }
}

/* The slowest rank's mean time of a floor call of `bytes`. */
static double floor_run(size_t bytes, int iters, int warmup) {
    for (int i = 0; i < warmup; ++i) floor_call(floor_in, floor_out, bytes);
    PMPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i) floor_call(floor_in, floor_out, bytes);
    double t = (MPI_Wtime() - t0) / iters, tmax = 0;
    own_allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return tmax;
}

static double run(int use_pmpi, const void *s, void *r, int count, MPI_Datatype dt, size_t bytes, int iters, int warmup) {
    for (int i = 0; i < warmup; ++i) one(use_pmpi, s, r, count, dt, bytes);
    PMPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    for (int i = 0; i < iters; ++i) one(use_pmpi, s, r, count, dt, bytes);
    double t = (MPI_Wtime() - t0) / iters, tmax = 0;
    /* The slowest rank's average, as the collective finishes with it. */
    own_allreduce(&t, &tmax, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return tmax;
}

/* Single-core bandwidths on rank 0 (bytes/s), on this run's own buffers:
 * memcpy, and dst += src over floats, vectorized for the widest unit the CPU
 * has (as glibc's memcpy is), so the bound is not understated. */
#if defined(__GNUC__) && defined(__x86_64__)
__attribute__((target_clones("avx512f", "avx2", "default")))
#endif
static void add_floats(float *restrict d, const float *restrict a, size_t n) {
    for (size_t i = 0; i < n; ++i) d[i] += a[i];
}
static void add3_floats(float *restrict d, const float *restrict a, const float *restrict b, size_t n) {
    for (size_t i = 0; i < n; ++i) d[i] = a[i] + b[i];
}
/* Bc: memcpy; Br: dst += src; Br3 (when c is given): dst = a + b, the
 * out-of-place reduction, one more memory stream than Br's. */
static void measure_bound(char *a, char *b, char *c, size_t bytes, double *bc, double *br, double *br3) {
    /* Best of several repetitions: a bound is what the machine can do. */
    int reps = bytes >= (64u << 20) ? 4 : 12;
    double tc = 1e30, tr = 1e30, tr3 = 1e30;
    memcpy(b, a, bytes); /* touch */
    if (c) memcpy(c, a, bytes);
    for (int i = 0; i < reps; ++i) {
        double t0 = MPI_Wtime();
        memcpy(b, a, bytes);
        double t1 = MPI_Wtime();
        add_floats((float *)b, (const float *)a, bytes / sizeof(float));
        double t2 = MPI_Wtime();
        if (c) add3_floats((float *)c, (const float *)a, (const float *)b, bytes / sizeof(float));
        double t3 = MPI_Wtime();
        if (t1 - t0 < tc) tc = t1 - t0;
        if (t2 - t1 < tr) tr = t2 - t1;
        if (t3 - t2 < tr3) tr3 = t3 - t2;
    }
    *bc = bytes / tc;
    *br = bytes / tr;
    *br3 = c ? bytes / tr3 : *br;
}

/* The busbw bound (GB/s) from the rates in bytes/s, and the one-pass bound
 * in *one_pass (see the header). */
static double bound_of(int coll_kind, int in_place, double n, double bc, double br, double br3, double *one_pass);

static void plot(const char *csv_path, const char *png, int ranks, const char *title) {
    char cmd[4096];
    snprintf(cmd, sizeof cmd,
             "gnuplot -e \"set terminal pngcairo size 900,560; set output '%s'; set datafile separator ','; "
             "set logscale x 2; set format x '%%g'; set xlabel 'message size (MiB)'; set ylabel 'busbw (GB/s)'; "
             "set key top left; set grid; set title '%s, %d ranks'; "
             "plot '%s' every ::1 using (column(1)/1048576):4 with linespoints title 'MPI (PMPI\\_Allreduce)', "
             "'' every ::1 using (column(1)/1048576):6 with linespoints title 'nexar', "
             "'' every ::1 using (column(1)/1048576):9 with lines dashtype 2 title 'copy-reduce bound'\" 2>&1",
             png, title, ranks, csv_path);
    int rc = system(cmd);
    if (rc == 0)
        printf("# plot written to %s\n", png);
    else
        printf("# --plot: gnuplot failed or is missing (Debian: apt-get install gnuplot-nox)\n");
}

static void cuda_or_host_copy(void *dst, const void *src, size_t bytes) {
    if (on_device) cuda.Memcpy(dst, src, bytes, 4);
    else if (dst != src) memcpy(dst, src, bytes);
}

static void fill(void *buf, size_t n, MPI_Datatype dt, int rank) {
    for (size_t i = 0; i < n; ++i) {
        int v = (int)((i * 7 + (size_t)rank * 3) % 17) - 8; /* exact in any order */
        if (dt == MPI_INT) ((int *)buf)[i] = v;
        else if (dt == MPI_FLOAT) ((float *)buf)[i] = (float)v;
        else ((double *)buf)[i] = v;
    }
}

/* Host buffer of `bytes`: plain malloc, or (thp) 2 MiB-aligned and advised
 * onto transparent huge pages, touched once so the pages exist. */
static char *host_alloc(size_t bytes, int thp) {
    if (!thp) return malloc(bytes);
    const size_t huge = 2u << 20;
    size_t len = (bytes + huge - 1) / huge * huge;
    void *p = NULL;
    if (posix_memalign(&p, huge, len) != 0) return NULL;
    madvise(p, len, MADV_HUGEPAGE);
    memset(p, 0, len);
    return p;
}

/* Percent of [p, p+bytes) backed by huge pages: AnonHugePages of the
 * mappings that overlap it, over its size (-1 when smaps cannot be read). */
static double huge_page_share(const void *p, size_t bytes) {
    FILE *f = fopen("/proc/self/smaps", "r");
    if (!f) return -1;
    unsigned long lo = (unsigned long)p, hi = lo + bytes, start = 0, end = 0;
    char line[512];
    double huge_kib = 0;
    int inside = 0;
    while (fgets(line, sizeof line, f)) {
        unsigned long a, b;
        long kib;
        if (sscanf(line, "%lx-%lx ", &a, &b) == 2 && strchr(line, '-') < strchr(line, ' ')) {
            start = a, end = b;
            inside = start < hi && end > lo;
        } else if (inside && sscanf(line, "AnonHugePages: %ld kB", &kib) == 1) {
            /* A mapping larger than the buffer: count at most the overlap. */
            double overlap = (double)((end < hi ? end : hi) - (start > lo ? start : lo)) / 1024;
            huge_kib += kib < overlap ? kib : overlap;
        }
    }
    fclose(f);
    return 100.0 * huge_kib / ((double)bytes / 1024);
}

/* --overhead: what interposition adds to calls that pass through.  The two
 * sides alternate `reps` times; each keeps its best average, which filters
 * out the other processes' noise on a shared machine. */
static int overhead_table(size_t min, size_t max, MPI_Datatype dt, size_t esz, int iters, int reps, int rank,
                          FILE *csv) {
    char *s = malloc(max), *r = malloc(max);
    if (!s || !r) return 1;
    memset(s, 0, max);
    memset(r, 0, max);
    if (rank == 0) {
        printf("# interposition cost: %d repetitions of %d calls per side, alternating; best average of each\n", reps,
               iters);
        printf("# %-12s %14s %14s %12s %10s\n", "Size", "MPI (ns)", "nexar (ns)", "added (ns)", "added");
        if (csv) fprintf(csv, "size_bytes,mpi_ns,nexar_ns,added_ns,added_pct\n");
    }
    for (size_t bytes = min; bytes <= max; bytes *= 2) {
        int count = (int)(bytes / esz);
        double t_mpi = 1e30, t_nx = 1e30;
        for (int rep = 0; rep < reps; ++rep) {
            double t = run(1, s, r, count, dt, bytes, iters, rep == 0 ? iters / 10 : 0);
            if (t < t_mpi) t_mpi = t;
            t = run(0, s, r, count, dt, bytes, iters, rep == 0 ? iters / 10 : 0);
            if (t < t_nx) t_nx = t;
        }
        if (rank == 0) {
            printf("%-14zu %14.1f %14.1f %12.1f %9.1f%%\n", bytes, t_mpi * 1e9, t_nx * 1e9, (t_nx - t_mpi) * 1e9,
                   100 * (t_nx - t_mpi) / t_mpi);
            if (csv) fprintf(csv, "%zu,%.2f,%.2f,%.2f,%.3f\n", bytes, t_mpi * 1e9, t_nx * 1e9, (t_nx - t_mpi) * 1e9,
                             100 * (t_nx - t_mpi) / t_mpi);
            fflush(stdout);
        }
    }
    free(s);
    free(r);
    return 0;
}

int main(int argc, char **argv) {
    size_t min = 1 << 20, max = 256u << 20;
    int iters = -1, warmup = -1, validate = 0, in_place = 0, reps = -1, overhead = 0, thp = 0, node_bound = 0,
        want_floor = 0;
    const char *type = "float", *csv_path = NULL, *plot_path = NULL;
    MPI_Init(&argc, &argv);
    own_allreduce = own_mpi(PMPI_Allreduce);
    own_reduce_scatter_block = own_mpi(PMPI_Reduce_scatter_block);
    own_allgather = own_mpi(PMPI_Allgather);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    nranks = size;
    my_rank = rank;
    for (int i = 1; i < argc; ++i) {
        if (!strcmp(argv[i], "-m") && i + 1 < argc) {
            if (!parse_range(argv[++i], &min, &max)) {
                if (rank == 0) fprintf(stderr, "nexar_osu_allreduce: -m takes MIN:MAX in bytes (K, M, G allowed)\n");
                MPI_Finalize();
                return 2;
            }
        } else if (!strcmp(argv[i], "-i") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-x") && i + 1 < argc) warmup = atoi(argv[++i]);
        else if (!strcmp(argv[i], "-c")) validate = 1;
        else if (!strcmp(argv[i], "-r") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--overhead")) overhead = 1;
        else if (!strcmp(argv[i], "-l")) in_place = 1;
        else if (!strcmp(argv[i], "--thp")) thp = 1;
        else if (!strcmp(argv[i], "--node-bound")) node_bound = 1;
        else if (!strcmp(argv[i], "--floor")) want_floor = 1;
        else if (!strcmp(argv[i], "-T") && i + 1 < argc) type = argv[++i];
        else if (!strcmp(argv[i], "--csv") && i + 1 < argc) csv_path = argv[++i];
        else if (!strcmp(argv[i], "--plot") && i + 1 < argc) plot_path = argv[++i];
        else if (!strcmp(argv[i], "-d") && i + 1 < argc && !strcmp(argv[i + 1], "cuda")) on_device = 1, ++i;
        else if (!strcmp(argv[i], "--collective") && i + 1 < argc) {
            ++i;
            coll = -1;
            for (int k = 0; k < 3; ++k)
                if (!strcmp(argv[i], coll_names[k])) coll = k;
            if (coll < 0) {
                if (rank == 0) fprintf(stderr, "nexar_osu_allreduce: --collective allreduce|reduce_scatter|allgather\n");
                MPI_Finalize();
                return 2;
            }
        }
        else {
            if (rank == 0) fprintf(stderr, "usage: %s [-m MIN:MAX] [-i N] [-x N] [-c] [-l] [-r N] [--overhead] [-T int|float|double] [-d cuda] [--thp] [--node-bound] [--floor] [--collective allreduce|reduce_scatter|allgather] [--csv FILE] [--plot FILE.png]\n", argv[0]);
            MPI_Finalize();
            return 2;
        }
    }
    MPI_Datatype dt = !strcmp(type, "int") ? MPI_INT : !strcmp(type, "double") ? MPI_DOUBLE : MPI_FLOAT;
    size_t esz = dt == MPI_DOUBLE ? 8 : 4;
    if (min < esz) min = esz;
    if (on_device && coll != ALLREDUCE) {
        if (rank == 0) fprintf(stderr, "nexar_osu_allreduce: -d cuda measures the allreduce only\n");
        MPI_Finalize();
        return 2;
    }

    if (on_device) {
        char why[256];
        if (cudart_load(&cuda, why, sizeof why) != 0) {
            if (rank == 0) fprintf(stderr, "nexar_osu_allreduce: -d cuda: %s\n", why);
            MPI_Finalize();
            return 2;
        }
        int ndev = 1;
        cuda.GetDeviceCount(&ndev);
        cuda.SetDevice(rank % ndev);
    }
    get_stats_fn get_stats = (get_stats_fn)dlsym(RTLD_DEFAULT, "nexar_get_stats");
    get_counter = (get_counter_fn)dlsym(RTLD_DEFAULT, "nexar_get_counter");
    int intercepted = get_stats != NULL;
    /* The plot is drawn from the CSV: make one if none was asked for. */
    char plot_csv[4096] = "";
    if (plot_path && !csv_path) snprintf(plot_csv, sizeof plot_csv, "%s.csv", plot_path), csv_path = plot_csv;
    FILE *csv = (rank == 0 && csv_path) ? fopen(csv_path, "w") : NULL;
    if (overhead) {
        if (rank == 0)
            printf("# nexar osu-style allreduce: %d ranks, %s; MPI = the MPI's own PMPI_Allreduce, nexar = MPI_Allreduce%s\n", size,
                   type, intercepted ? "" : " (WARNING: libnexar_pmpi is not loaded, both columns are MPI)");
        int rc = overhead_table(min, max, dt, esz, iters > 0 ? iters : 2000, reps > 0 ? reps : 30, rank, csv);
        if (csv) fclose(csv);
        MPI_Finalize();
        return rc;
    }
    if (want_floor && coll == ALLREDUCE && !on_device && size >= 2) floor_set_up(max);
    if (rank == 0 && want_floor && !floor_parts)
        printf("# --floor: not measured (an allreduce of host buffers with every rank on one node only)\n");
    if (rank == 0) {
        const char *mpi_names[] = {"PMPI_Allreduce", "PMPI_Reduce_scatter_block", "PMPI_Allgather"};
        printf("# nexar osu-style %s: %d ranks, %s, %s, %s buffers\n# MPI = %s, nexar = MPI_%s%s\n",
               coll_names[coll], size, type, in_place ? "in place" : "out of place",
               on_device ? "CUDA device" : "host",
               on_device ? "cudaMemcpy to host + PMPI_Allreduce + cudaMemcpy back" : mpi_names[coll],
               mpi_names[coll] + 5, intercepted ? "" : " (WARNING: libnexar_pmpi is not loaded, both columns are MPI)");
        if (coll != ALLREDUCE)
            printf("# size = the whole vector S, S/n per rank; busbw = S/t (n-1)/n\n");
        printf("# MALLOC_MMAP_THRESHOLD_=%s\n", getenv("MALLOC_MMAP_THRESHOLD_") ? getenv("MALLOC_MMAP_THRESHOLD_") : "(glibc default)");
        if (coll == REDUCE_SCATTER)
            printf("# bound = 1/(1/Bc + 1/Brx), Brx = %s; one-pass bound = 1/(1/(2Bc) + 1/Brx)\n",
                   in_place ? "Br (dst+=src)" : "Br3 (dst=a+b)");
        else if (coll == ALLGATHER)
            printf("# bound = Bc/2 (two copies per arrival), one-pass bound = Bc; Bc = single-core memcpy\n");
        else if (!on_device && in_place)
            printf("# bound = 2/(2/Bc + 1/Br): Bc, Br = single-core memcpy and dst+=src on rank 0, same size\n");
        else if (!on_device)
            printf("# bound = 2(n-1)/(2(n-1)/Bc + 1/Br3 + (n-2)/Br): Bc, Br, Br3 = single-core memcpy, dst+=src and\n"
                   "#   dst=a+b (out of place, the first reduction of each chunk) on rank 0, same size\n");
        if (!on_device && coll == ALLREDUCE)
            printf("# one-pass bound = 2(n-1)/((n-1)/Bc + 1/Br3 + (n-2)/Br): each arriving byte crosses memory once\n");
        const int nb = node_bound && !on_device;
        if (floor_parts)
            printf("# floor = a bare exchange of the same bytes through a shared window, timed in the same rounds "
                   "(copy in, publish, wait, sum); nexar %%floor = floor / nexar\n");
        printf("# %-12s %12s %9s %9s %12s %9s %9s %9s %7s %9s %7s %7s %7s%s%s  %s\n", "Size", "MPI Avg(us)", "MPI", "MPI",
               "nexar Avg", "nexar", "nexar", "speedup", "ring", "bound", "MPI", "nexar", "nexar",
               nb ? "   node bd     MPI   nexar node memcpy" : "", floor_parts ? "     floor   nexar" : "", "path");
        printf("# %-12s %12s %9s %9s %12s %9s %9s %9s %7s %9s %7s %7s %7s%s%s\n", "(bytes)", "", "algbw", "busbw", "(us)",
               "algbw", "busbw", "", "calls", "(GB/s)", "%bound", "%bound", "%1pass",
               nb ? "    (GB/s)   %node   %node    (GB/s)" : "", floor_parts ? "      (us)  %floor" : "");
        printf("# path: what nexar's calls did in the last round (its counters): ring, 1shot (the one-shot allreduce), "
               "hier, mpi (passed through), fallbk (fell back after the agreement); a+b: some calls each (the\n"
               "#   learner, NEXAR_THRESHOLD_BYTES=auto, tries both paths on the first calls of each size)\n");
        if (csv) fprintf(csv, "size_bytes,ranks,mpi_avg_us,mpi_busbw_gbs,nexar_avg_us,nexar_busbw_gbs,speedup,ring_calls,"
                              "bound_busbw_gbs,memcpy_gbs,add_gbs,mpi_algbw_gbs,nexar_algbw_gbs,add3_gbs,"
                              "one_pass_bound_gbs,node_bound_busbw_gbs,node_memcpy_gbs,path,floor_us\n");
        fflush(stdout);
    }
    if (rank == 0 && node_bound && !on_device)
        printf("# node bound: the bound's rates measured on every rank at once (all %d ranks copying), the slowest "
               "rank's; node memcpy = the ranks' memcpy rates summed\n", size);
    char *host_s = host_alloc(max, thp), *host_r = host_alloc(max, thp), *check = validate ? malloc(max) : NULL;
    /* Out of place, the bound's dst = a + b needs a third buffer of the same kind. */
    char *host_t = !on_device && !in_place ? host_alloc(max, thp) : NULL;
    char *sbuf = host_s, *rbuf = host_r;
    if (on_device) {
        host_stage = malloc(max);
        if (cuda.Malloc((void **)&sbuf, max) != 0 || cuda.Malloc((void **)&rbuf, max) != 0) sbuf = NULL;
    }
    if (!host_s || !host_r || !sbuf || !rbuf || (validate && !check) || (!on_device && !in_place && !host_t)) {
        fprintf(stderr, "rank %d: cannot allocate %zu bytes\n", rank, max);
        MPI_Abort(MPI_COMM_WORLD, 1);
    }
    if (thp && host_s && host_r) {
        /* How much really is on huge pages: the least over ranks. */
        double share[2] = {huge_page_share(host_s, max), huge_page_share(host_r, max)}, least[2];
        own_allreduce(share, least, 2, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
        if (rank == 0) {
            printf("# buffers: transparent huge pages (2 MiB-aligned, MADV_HUGEPAGE); on huge pages: send %.0f%%, "
                   "receive %.0f%% (least over ranks)%s\n",
                   least[0], least[1], least[0] < 90 || least[1] < 90 ? "  WARNING: few huge pages, see "
                                                                       "/sys/kernel/mm/transparent_hugepage" : "");
            fflush(stdout);
        }
    }
    int bad = 0;
    for (size_t bytes = min; bytes <= max; bytes *= 2) {
        int count = (int)(bytes / esz);
        if (coll != ALLREDUCE) count -= count % size;  /* whole blocks */
        int it = iters > 0 ? iters : bytes >= (64u << 20) ? 10 : bytes >= (8u << 20) ? 20 : 100;
        int wu = warmup >= 0 ? warmup : bytes >= (64u << 20) ? 2 : 5;
        fill(host_s, (size_t)count, dt, rank);
        cuda_or_host_copy(sbuf, host_s, bytes);
        cuda_or_host_copy(rbuf, host_s, bytes);
        const void *s = in_place ? MPI_IN_PLACE : sbuf;
        stats_t before = {0}, after = {0};
        int paths = 0, all_paths = 0;  /* the last round's, and every round's */
        /* Interleave: MPI, nexar, MPI, nexar; keep each side's best average. */
        double t_mpi = 1e30, t_nx = 1e30, t_floor = 1e30;
        for (int rep = 0; rep < (reps > 0 ? reps : 2); ++rep) {
            double t = run(1, s, rbuf, count, dt, bytes, it, wu);
            if (t < t_mpi) t_mpi = t;
            if (floor_parts && bytes <= floor_max && (t = floor_run(bytes, it, wu)) < t_floor) t_floor = t;
            if (get_stats) get_stats(&before);
            path_counts_t p0 = path_counts();
            t = run(0, s, rbuf, count, dt, bytes, it, wu);
            paths = path_bits(p0, path_counts());  /* the last round's: after the learner's trials */
            all_paths |= paths;
            if (get_stats) get_stats(&after);
            if (t < t_nx) t_nx = t;
        }
        /* Every rank must have taken the same path(s): a rank that passed
         * through while another took the ring would be a bug of nexar's. */
        int paths_lo = 0, paths_hi = 0;
        own_allreduce(&all_paths, &paths_lo, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
        own_allreduce(&all_paths, &paths_hi, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        char path_buf[48];
        const char *path = path_name(paths, path_buf, sizeof path_buf);
        if (paths_lo != paths_hi && rank == 0)
            printf("# WARNING: at %zu bytes the ranks took different paths (this rank: %s)\n", bytes, path);
        if (validate && coll == ALLREDUCE) {  /* nexar's result against PMPI_Allreduce on a host copy of the input */
            fill(host_s, (size_t)count, dt, rank);
            memcpy(check, host_s, bytes);
            own_allreduce(MPI_IN_PLACE, check, count, dt, MPI_SUM, MPI_COMM_WORLD);
            cuda_or_host_copy(sbuf, host_s, bytes);
            cuda_or_host_copy(rbuf, host_s, bytes);
            MPI_Allreduce(s, rbuf, count, dt, MPI_SUM, MPI_COMM_WORLD);
            cuda_or_host_copy(host_r, rbuf, bytes);
            if (memcmp(check, host_r, bytes)) bad = 1;
        } else if (validate) {  /* the same call through PMPI, on the same input */
            fill(host_s, (size_t)count, dt, rank);
            memcpy(check, host_s, bytes);
            memcpy(rbuf, host_s, bytes);
            one(1, s, check, count, dt, bytes);  /* s: MPI_IN_PLACE or sbuf, which holds host_s */
            one(0, s, rbuf, count, dt, bytes);
            size_t result = coll == REDUCE_SCATTER ? (size_t)(count / size) * esz : (size_t)count * esz;
            if (memcmp(check, rbuf, result)) bad = 1;
        }
        double bc = 0, br = 0, br3 = 0, bound = 0, one_pass = 0, node_bd = 0, node_copy = 0;
        if (!on_device) {  /* host bound, measured while the other ranks wait */
            if (rank == 0) measure_bound(host_s, host_r, host_t, bytes, &bc, &br, &br3);
            PMPI_Barrier(MPI_COMM_WORLD);
            /* Per rank: 2(n-1) chunk copies in, n-1 chunk reductions, of
             * which out of place the first writes recvbuf from two inputs. */
            if (rank == 0) bound = bound_of(coll, in_place, size, bc, br, br3, &one_pass);
            if (node_bound) {  /* every rank at once, the slowest rank's rates */
                double mine[3], least[3], nb_one_pass, copy_sum = 0;
                PMPI_Barrier(MPI_COMM_WORLD);
                measure_bound(host_s, host_r, host_t, bytes, &mine[0], &mine[1], &mine[2]);
                own_allreduce(mine, least, 3, MPI_DOUBLE, MPI_MIN, MPI_COMM_WORLD);
                own_allreduce(&mine[0], &copy_sum, 1, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
                node_bd = bound_of(coll, in_place, size, least[0], least[1], least[2], &nb_one_pass);
                node_copy = copy_sum / 1e9;
            }
        }
        double factor = (coll == ALLREDUCE ? 2.0 : 1.0) * (size - 1) / size;
        double bw_mpi = bytes / t_mpi * factor / 1e9, bw_nx = bytes / t_nx * factor / 1e9;
        unsigned long long ring = after.ring_calls - before.ring_calls;
        if (rank == 0) {
            char node_cols[96] = "";
            if (node_bd > 0)
                snprintf(node_cols, sizeof node_cols, " %9.3f %6.0f%% %6.0f%% %9.2f", node_bd, 100 * bw_mpi / node_bd,
                         100 * bw_nx / node_bd, node_copy);
            char floor_cols[48] = "", floor_csv[24] = "";
            if (t_floor < 1e30) {
                snprintf(floor_cols, sizeof floor_cols, " %9.2f %6.0f%%", t_floor * 1e6, 100 * t_floor / t_nx);
                snprintf(floor_csv, sizeof floor_csv, "%.3f", t_floor * 1e6);
            }
            printf("%-14zu %12.2f %9.3f %9.3f %12.2f %9.3f %9.3f %8.2fx %7llu %9.3f %6.0f%% %6.0f%% %6.0f%%%s%s  %-6s%s%s\n",
                   bytes, t_mpi * 1e6, bytes / t_mpi / 1e9, bw_mpi, t_nx * 1e6, bytes / t_nx / 1e9, bw_nx,
                   t_mpi / t_nx, ring, bound, bound > 0 ? 100 * bw_mpi / bound : 0,
                   bound > 0 ? 100 * bw_nx / bound : 0, one_pass > 0 ? 100 * bw_nx / one_pass : 0, node_cols,
                   floor_cols, path,
                   paths_lo != paths_hi ? " (ranks differ!)" : "", validate ? (bad ? "  VALIDATION FAILED" : "  ok") : "");
            char node_csv[96] = ",,";  /* empty where not measured */
            if (node_bd > 0) snprintf(node_csv, sizeof node_csv, "%.4f,%.4f,", node_bd, node_copy);
            if (csv) fprintf(csv, "%zu,%d,%.3f,%.4f,%.3f,%.4f,%.4f,%llu,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%.4f,%s%s,%s\n", bytes,
                             size, t_mpi * 1e6, bw_mpi, t_nx * 1e6, bw_nx, t_mpi / t_nx, ring, bound, bc / 1e9,
                             br / 1e9, bytes / t_mpi / 1e9, bytes / t_nx / 1e9, br3 / 1e9, one_pass, node_csv,
                             paths_lo != paths_hi ? "split" : path, floor_csv);
            fflush(stdout);
        }
    }
    if (csv) fclose(csv);
    if (rank == 0 && plot_path) {
        char title[256];
        snprintf(title, sizeof title, "allreduce busbw, %s, %s buffers%s, malloc %s", type,
                 on_device ? "CUDA" : "host", thp ? " on huge pages" : "",
                 getenv("MALLOC_MMAP_THRESHOLD_") ? "tuned" : "default");
        plot(csv_path, plot_path, size, title);
    }
    int any_bad = 0;
    own_allreduce(&bad, &any_bad, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    if (rank == 0 && validate)
        printf("# validation: %s%s\n", any_bad ? "FAILED" : "all sizes match ",
               any_bad ? "" : coll == REDUCE_SCATTER ? "PMPI_Reduce_scatter_block" : coll == ALLGATHER ? "PMPI_Allgather"
                                                                                          : "PMPI_Allreduce");
    if (on_device) { cuda.Free(sbuf); cuda.Free(rbuf); free(host_stage); }
    free(host_s); free(host_r); free(check); free(host_t);
    if (floor_win != MPI_WIN_NULL) MPI_Win_free(&floor_win);
    MPI_Finalize();
    return any_bad;
}

static double bound_of(int coll_kind, int in_place, double n, double bc, double br, double br3, double *one_pass) {
    if (coll_kind == REDUCE_SCATTER) {
        double brx = in_place ? br : br3;
        *one_pass = 1 / (1 / (2 * bc) + 1 / brx) / 1e9;
        return 1 / (1 / bc + 1 / brx) / 1e9;
    }
    if (coll_kind == ALLGATHER) {
        *one_pass = bc / 1e9;
        return bc / 2 / 1e9;
    }
    /* Per rank: 2(n-1) chunk copies in, n-1 chunk reductions, of which out
     * of place the first writes recvbuf from two inputs. */
    *one_pass = 2 * (n - 1) / ((n - 1) / bc + 1 / br3 + (n - 2) / br) / 1e9;
    return 2 * (n - 1) / (2 * (n - 1) / bc + 1 / br3 + (n - 2) / br) / 1e9;
}
