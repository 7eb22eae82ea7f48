/*
 * An ordinary MPI program that knows nothing of nexar.  The preload test runs
 * it with LD_PRELOAD=libnexar_pmpi.so.  Checks results against values it can
 * compute itself: sums of rank-dependent integers and doubles, MAX of ints.
 */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv) {
    int rank, size, errors = 0;
    const int n = 1 << 20; /* 4 MiB of int, 8 MiB of double */
    MPI_Init(&argc, &argv);
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
