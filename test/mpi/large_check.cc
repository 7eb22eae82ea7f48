// More than 2 GiB in one MPI_Allreduce (size_t byte arithmetic end to end):
// 2^28 + 12345 doubles (about 2.1 GB) in place, with values whose sums are
// exact, checked element by element; then a reduce-scatter and an allgather
// of over 2 GiB on the same buffer, in place, and an allgather out of place
// (its own block sent from a buffer of its own).  With small segments the
// per-chunk segment count exceeds the tag's 4096 and segments must grow
// instead.  With an MPI-4 MPI (MPICH), last an MPI_Allreduce_c of more than
// INT_MAX items: the same bytes as int8.  Needs about 2.2 GB per rank and
// the send block (1.1 GB at 2 ranks).  Run
// by `make check-large`.
#include <mpi.h>

#include "../own_mpi.h"

#include <cstdint>
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
    // The vector's sums, as the allreduce left them, feed a reduce-scatter
    // of whole blocks: rank r's block of the sums, times the ranks.
    auto sum_at = [&](size_t i) { return double(size) * double(i % 7) + double(size * (size - 1) / 2); };
    const size_t c = n / size_t(size);
    int rc2 = MPI_Reduce_scatter_block(MPI_IN_PLACE, x.data(), int(c), MPI_DOUBLE, MPI_SUM, MPI_COMM_WORLD);
    for (size_t j = 0; j < c; ++j)
        if (x[j] != double(size) * sum_at(size_t(rank) * c + j)) ++bad;
    // An allgather of the blocks, in place.
    for (size_t j = 0; j < c; ++j) x[size_t(rank) * c + j] = double(rank) + double(j % 5);
    int rc3 = MPI_Allgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, x.data(), int(c), MPI_DOUBLE, MPI_COMM_WORLD);
    for (int r = 0; r < size; ++r)
        for (size_t j = 0; j < c; ++j)
            if (x[size_t(r) * c + j] != double(r) + double(j % 5)) ++bad;
    // Out of place: each rank's block from a buffer of its own.
    std::vector<double> mine(c);
    for (size_t j = 0; j < c; ++j) mine[j] = double(3 * rank) + double(j % 11);
    int rc5 = MPI_Allgather(mine.data(), int(c), MPI_DOUBLE, x.data(), int(c), MPI_DOUBLE, MPI_COMM_WORLD);
    for (int r = 0; r < size; ++r)
        for (size_t j = 0; j < c; ++j)
            if (x[size_t(r) * c + j] != double(3 * r) + double(j % 11)) ++bad;
    bad += rc5 != MPI_SUCCESS;
    std::vector<double>().swap(mine);
    unsigned long long want_ring = 4;
#if MPI_VERSION >= 4
    // More items than an int holds: the large-count binding.
    int8_t* bytes = reinterpret_cast<int8_t*>(x.data());
    const size_t nb = n * sizeof(double);
    for (size_t i = 0; i < nb; ++i) bytes[i] = int8_t(i % 5 + size_t(rank));
    int rc4 = MPI_Allreduce_c(MPI_IN_PLACE, bytes, MPI_Count(nb), MPI_INT8_T, MPI_SUM, MPI_COMM_WORLD);
    for (size_t i = 0; i < nb; ++i)
        if (bytes[i] != int8_t(size_t(size) * (i % 5) + size_t(size * (size - 1) / 2))) ++bad;
    bad += rc4 != MPI_SUCCESS;
    want_ring = 5;
#endif
    nexar_stats_t st;
    nexar_get_stats(&st);
    unsigned long long errors =
        bad + (rc != MPI_SUCCESS) + (rc2 != MPI_SUCCESS) + (rc3 != MPI_SUCCESS) + (st.ring_calls != want_ring),
        total = 0;
    own_mpi(PMPI_Allreduce)(&errors, &total, 1, MPI_UNSIGNED_LONG_LONG, MPI_SUM, MPI_COMM_WORLD);
    if (rank == 0)
        printf("large_check: %zu bytes, %d ranks, %.2f s, ring_calls=%llu, errors=%llu\n", n * sizeof(double), size,
               took, (unsigned long long)st.ring_calls, total);
    MPI_Finalize();
    return total ? 1 : 0;
}
