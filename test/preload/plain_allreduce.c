/*
 * An ordinary MPI program that knows nothing of nexar.  The preload test runs
 * it with LD_PRELOAD=libnexar_pmpi.so.  Checks results against values it can
 * compute itself: sums of rank-dependent integers and doubles, MAX of ints:
 * 11 MPI_Allreduce calls, 9 of them of 4-8 MiB.
 *
 * --halves: then one MPI_Reduce_scatter_block and one MPI_Allgather of
 * 4 MiB as well.  --thread-multiple: MPI_Init_thread(MPI_THREAD_MULTIPLE)
 * instead of MPI_Init.  (The PMPI tool test, run-tool-tests.sh, uses both.)
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int main(int argc, char **argv) {
    int rank, size, errors = 0, halves = 0, multiple = 0;
    const int n = 1 << 20; /* 4 MiB of int, 8 MiB of double */
    for (int i = 1; i < argc; ++i) {
        halves |= strcmp(argv[i], "--halves") == 0;
        multiple |= strcmp(argv[i], "--thread-multiple") == 0;
    }
    if (multiple) {
        int provided = MPI_THREAD_SINGLE;
        MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
    } else {
        MPI_Init(&argc, &argv);
    }
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);

    int *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b);
    double *x = malloc(n * sizeof *x);
    for (int iter = 0; iter < 3; ++iter) {
        for (int i = 0; i < n; ++i) a[i] = rank * 3 + i % 1000 + iter;
        MPI_Allreduce(a, b, n, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        for (int i = 0; i < n; ++i) {
            long want = 3L * size * (size - 1) / 2 + (long)size * (i % 1000 + iter);
            if (b[i] != want) { if (errors++ < 5) fprintf(stderr, "rank %d: sum[%d]=%d, want %ld\n", rank, i, b[i], want); }
        }
        for (int i = 0; i < n; ++i) x[i] = 0.5 * rank + i % 7;
        MPI_Allreduce(MPI_IN_PLACE, x, n, MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
        for (int i = 0; i < n; ++i) {
            double want = 0.25 * size * (size - 1) + (double)size * (i % 7);
            if (x[i] != want) { if (errors++ < 5) fprintf(stderr, "rank %d: dsum[%d]=%g, want %g\n", rank, i, x[i], want); }
        }
        for (int i = 0; i < n; ++i) a[i] = (i + rank) % size;
        MPI_Allreduce(a, b, n, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
        for (int i = 0; i < n; ++i)
            if (b[i] != size - 1) { if (errors++ < 5) fprintf(stderr, "rank %d: max[%d]=%d\n", rank, i, b[i]); }
    }
    if (halves) {
        /* Rank r's block of the reduce-scatter: sum over ranks q of q + i. */
        const int block = n / size;
        for (int i = 0; i < block * size; ++i) a[i] = rank + i % 1000;
        MPI_Reduce_scatter_block(a, b, block, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
        for (int i = 0; i < block; ++i) {
            long want = (long)size * (size - 1) / 2 + (long)size * ((rank * block + i) % 1000);
            if (b[i] != want) { if (errors++ < 5) fprintf(stderr, "rank %d: rs[%d]=%d, want %ld\n", rank, i, b[i], want); }
        }
        /* Allgather: block q holds q * 7 + i. */
        for (int i = 0; i < block; ++i) a[i] = rank * 7 + i;
        MPI_Allgather(a, block, MPI_INT, b, block, MPI_INT, MPI_COMM_WORLD);
        for (int q = 0; q < size; ++q)
            for (int i = 0; i < block; ++i)
                if (b[q * block + i] != q * 7 + i) {
                    if (errors++ < 5) fprintf(stderr, "rank %d: ag[%d]=%d\n", rank, q * block + i, b[q * block + i]);
                }
    }
    /* A small one too: it passes through. */
    int one = 1, total = 0;
    MPI_Allreduce(&one, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (total != size) ++errors;

    int all = 0;
    MPI_Allreduce(&errors, &all, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0) printf("plain_allreduce: ranks=%d errors=%d\n", size, all);
    free(a); free(b); free(x);
    MPI_Finalize();
    return all ? 1 : 0;
}
