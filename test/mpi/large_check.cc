// More than 2 GiB in one MPI_Allreduce (size_t byte arithmetic end to end):
// 2^28 + 12345 doubles (about 2.1 GB) in place, with values whose sums are
// exact, checked element by element.  With small segments the per-chunk
// segment count exceeds the tag's 4096 and segments must grow instead.
// Needs about 2.2 GB per rank.  Run by `make check-large`.
#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <vector>

#include "nexar/nexar.h"

int main(int argc, char** argv) {
    MPI_Init(&argc, &argv);
    int rank, size;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    const size_t n = (size_t(1) << 28) + 12345;
    std::vector<double> x(n);
    for (size_t i = 0; i < n; ++i) x[i] = double(i % 7 + size_t(rank));
    double t0 = MPI_Wtime();
    int rc = MPI_Allreduce(MPI_IN_PLACE, x.data(), int(n), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    double took = MPI_Wtime() - t0;
    size_t bad = 0;
    for (size_t i = 0; i < n; ++i)
        if (x[i] != double(size) * double(i % 7) + double(size * (size - 1) / 2)) ++bad;
    nexar_stats_t st;
    nexar_get_stats(&st);
    unsigned long long errors = bad + (rc != MPI_SUCCESS) + (st.ring_calls != 1), total = 0;
    PMPI_Allreduce(&errors, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("large_check: %zu bytes, %d ranks, %.2f s, ring_calls=%llu, errors=%llu\n", n * sizeof(double), size,
               took, (unsigned long long)st.ring_calls, total);
    MPI_Finalize();
    return total ? 1 : 0;
}
