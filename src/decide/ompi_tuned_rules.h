// Which allreduce algorithm Open MPI's coll/tuned component picks by its
// fixed rules: what a job gets from Open MPI 4.1 with no coll_tuned_*
// setting, for comparison with the schedules nexar's model picks
// (nexar-info --model).
//
// The rules are Open MPI 4.1.x's ompi_coll_tuned_allreduce_intra_dec_fixed
// (ompi/mca/coll/tuned/coll_tuned_decision_fixed.c, the tables generated
// from the ompi-collectives-tuning measurements that 4.1.0 introduced): a
// table by communicator size and total data size (the datatype's size times
// count), one for commutative operations and one for the others.
// Re-expressed here as data, not copied; the function returns the same
// algorithm number for every input.  Open MPI 5 adds algorithm 7 and
// changes some rows: these are 4.1's.
//
// What then runs can differ (ompi/mca/coll/base/coll_base_allreduce.c,
// same version): the ring (4) falls back to recursive doubling when count
// < communicator size; the segmented ring (5), called by the fixed rules
// with segment size 0, runs the plain ring (and so, below that count,
// recursive doubling); Rabenseifner's (6) falls back to basic linear when
// count < the largest power of two <= communicator size, or for a
// non-commutative operation.  ompi_tuned_allreduce_runs applies these.
#pragma once

#include <cstdint>

namespace nexar {

enum class OmpiAllreduce {
    basic_linear = 1,
    nonoverlapping = 2,
    recursive_doubling = 3,
    ring = 4,
    segmented_ring = 5,
    rabenseifner = 6,
};

// Open MPI's own names (coll_tuned_allreduce_algorithm's values).
inline const char* ompi_allreduce_name(OmpiAllreduce a) {
    switch (a) {
        case OmpiAllreduce::basic_linear: return "basic_linear";
        case OmpiAllreduce::nonoverlapping: return "nonoverlapping";
        case OmpiAllreduce::recursive_doubling: return "recursive_doubling";
        case OmpiAllreduce::ring: return "ring";
        case OmpiAllreduce::segmented_ring: return "segmented_ring";
        case OmpiAllreduce::rabenseifner: return "rabenseifner";
    }
    return "?";
}

namespace ompi_tuned_detail {

// One row of a table: communicators smaller than `below_ranks` (the last
// row: any size) take, for total bytes below each bound in turn, the
// algorithm beside it, and `otherwise` from the last bound on.
struct Cut {
    uint64_t below_bytes;
    int alg;
};
struct Row {
    int below_ranks;  // 0: no bound
    Cut cuts[6];
    int ncuts;
    int otherwise;
};

constexpr Row kCommutative[] = {
    {4, {{8, 4}, {4096, 3}, {8192, 4}, {16384, 3}, {65536, 4}, {262144, 5}}, 6, 6},
    {8, {{16, 4}, {8192, 3}}, 2, 6},
    {16, {{8192, 3}}, 1, 6},
    {32, {{64, 5}, {4096, 3}}, 2, 6},
    {64, {{128, 5}}, 1, 6},
    {128, {{262144, 3}}, 1, 6},
    {256, {{131072, 2}, {262144, 3}}, 2, 6},
    {512, {{4096, 2}}, 1, 6},
    {2048, {{2048, 2}, {16384, 3}}, 2, 6},
    {4096, {{2048, 2}, {4096, 5}, {16384, 3}}, 3, 6},
    {0, {{2048, 2}, {16384, 5}, {32768, 3}}, 3, 6},
};

constexpr Row kNonCommutative[] = {
    {4, {{131072, 3}}, 1, 1},
    {8, {}, 0, 3},
    {16, {{1048576, 3}}, 1, 2},
    {128, {}, 0, 3},
    {256, {{131072, 2}, {524288, 3}}, 2, 2},
    {512, {{4096, 2}, {524288, 3}}, 2, 2},
    {0, {{2048, 2}}, 1, 3},
};

template <size_t N>
int lookup(const Row (&table)[N], int comm_size, uint64_t total_bytes) {
    for (const Row& row : table) {
        if (row.below_ranks != 0 && comm_size >= row.below_ranks) continue;
        for (int i = 0; i < row.ncuts; ++i)
            if (total_bytes < row.cuts[i].below_bytes) return row.cuts[i].alg;
        return row.otherwise;
    }
    return 0;  // not reached: the last row has no bound
}

}  // namespace ompi_tuned_detail

// The algorithm 4.1's fixed rules pick for an allreduce of `total_bytes`
// on `comm_size` ranks.
inline OmpiAllreduce ompi_tuned_allreduce_rule(int comm_size, uint64_t total_bytes, bool commutative) {
    using namespace ompi_tuned_detail;
    return OmpiAllreduce(commutative ? lookup(kCommutative, comm_size, total_bytes)
                                     : lookup(kNonCommutative, comm_size, total_bytes));
}

// The algorithm that then runs for `count` elements (the fallbacks above).
inline OmpiAllreduce ompi_tuned_allreduce_runs(OmpiAllreduce picked, int comm_size, uint64_t count, bool commutative) {
    uint64_t pof2 = 1;
    while (pof2 * 2 <= uint64_t(comm_size)) pof2 *= 2;
    switch (picked) {
        case OmpiAllreduce::segmented_ring:
        case OmpiAllreduce::ring:
            return count < uint64_t(comm_size) ? OmpiAllreduce::recursive_doubling : OmpiAllreduce::ring;
        case OmpiAllreduce::rabenseifner:
            return count < pof2 || !commutative ? OmpiAllreduce::basic_linear : picked;
        default: return picked;
    }
}

}  // namespace nexar
