// The cost model's schedules across nodes (algo/cost_model.h) against times
// worked out by hand, the choice it makes among them, and Open MPI 4.1's
// tuned allreduce rules (decide/ompi_tuned_rules.h) at points read off its
// coll_tuned_decision_fixed.c.
#include <gtest/gtest.h>

#include <initializer_list>

#include "algo/cost_model.h"
#include "decide/cost_probe.h"
#include "decide/ompi_tuned_rules.h"

using namespace nexar;

namespace {

// Round numbers: shared memory 0.5 us and 4 GB/s, the network 1 us and
// 1 GB/s; S = 1 MB, so S/beta_net = 1 ms and S/beta_shm = 0.25 ms.
CostModel round_model() {
    CostModel m;
    m.shm = {0.5e-6, 4e9};
    m.net = {1e-6, 1e9};
    return m;
}
constexpr double kS = 1e6;
constexpr double kTol = 1e-12;

// nexar-info --model's default network: 3 us, 25 Gbit/s.
CostModel ethernet_model() {
    CostModel m = default_cost_model();
    m.net = {3e-6, 25e9 / 8};
    return m;
}

// A point of Open MPI's table: communicator size, total bytes, its pick.
struct TunedPoint {
    int ranks;
    uint64_t bytes;
    OmpiAllreduce alg;
};

void expect_tuned_rule(std::initializer_list<TunedPoint> points, bool commutative) {
    for (const TunedPoint& p : points)
        EXPECT_EQ(ompi_tuned_allreduce_rule(p.ranks, p.bytes, commutative), p.alg)
            << p.ranks << " ranks, " << p.bytes << " B, commutative " << commutative;
}

}  // namespace

TEST(CostModel, HalvingDoublingPowerOfTwo) {
    const CostModel m = round_model();
    // 8 nodes: 3 halving and 3 doubling steps; 2 * 7/8 S through the link.
    EXPECT_NEAR(halving_doubling_seconds(m, kS, 8, 1), 6e-6 + 1.75e-3, kTol);
    EXPECT_NEAR(halving_doubling_seconds(m, kS, 16, 1), 8e-6 + 1.875e-3, kTol);
    EXPECT_NEAR(halving_doubling_seconds(m, kS, 2, 1), 2e-6 + 1e-3, kTol);
    EXPECT_EQ(halving_doubling_seconds(m, kS, 1, 1), 0);
}

TEST(CostModel, HalvingDoublingFold) {
    const CostModel m = round_model();
    // 6 nodes: P' = 4 (4 steps, 1.5 S) and the fold, 2 messages of S.
    EXPECT_NEAR(halving_doubling_seconds(m, kS, 6, 1), 4e-6 + 1.5e-3 + 2 * (1e-6 + 1e-3), kTol);
    // 3 nodes: P' = 2.
    EXPECT_NEAR(halving_doubling_seconds(m, kS, 3, 1), 2e-6 + 1e-3 + 2 * (1e-6 + 1e-3), kTol);
}

TEST(CostModel, FlatHalvingDoublingSeveralRanksPerNode) {
    const CostModel m = round_model();
    // 4 x 4: 16 ranks, 4 steps; the first 2 cross the network with all 4
    // ranks of a node at once (S/2 + S/4 each, 3 S a phase on the link),
    // the last 2 stay in the node (S/8 + S/16).
    EXPECT_NEAR(halving_doubling_seconds(m, kS, 4, 4), 4e-6 + 2e-6 + 6e-3 + 2 * 0.1875 * 0.25e-3, kTol);
    // 2 x 3: 6 ranks, n' = 4, both steps cross (L odd), 3 ranks of S/2 +
    // S/4 a phase; the fold's pair may straddle nodes: the network's cost.
    EXPECT_NEAR(halving_doubling_seconds(m, kS, 2, 3), 4e-6 + 4.5e-3 + 2 * (1e-6 + 1e-3), kTol);
    // 3 x 2: 6 ranks, n' = 4: one step across (2 ranks of S/2 a phase), one
    // inside (S/4), and the fold inside the node.
    EXPECT_NEAR(halving_doubling_seconds(m, kS, 3, 2), 2e-6 + 1e-6 + 2e-3 + 0.125e-3 + 2 * (0.5e-6 + 0.25e-3), kTol);
    // One node of 8: all in shared memory.
    EXPECT_NEAR(halving_doubling_seconds(m, kS, 1, 8), 3e-6 + 2 * 0.875 * 0.25e-3, kTol);
}

TEST(CostModel, HierarchicalHalvingDoubling) {
    const CostModel m = round_model();
    // 6 x 4 in 2 pieces: node = 1.5 S/beta_shm = 0.375 ms; net = (1.5 + 2) S
    // (P' = 4 and the fold); per piece 6 ring messages in the node and
    // 4 + 2 across.
    EXPECT_NEAR(hierarchical_halving_doubling_seconds(m, kS, 6, 4, 2), 2 * (3e-6 + 6e-6) + 3.5e-3 + 0.375e-3 / 2, kTol);
    // 8 x 4, one piece: net = 1.75 S, 6 messages across.
    EXPECT_NEAR(hierarchical_halving_doubling_seconds(m, kS, 8, 4, 1), 3e-6 + 6e-6 + 1.75e-3 + 0.375e-3, kTol);
    // At 2 nodes one exchange is one ring step: the two are the same.
    EXPECT_DOUBLE_EQ(hierarchical_halving_doubling_seconds(m, kS, 2, 2, 1), hierarchical_seconds(m, kS, 2, 2, 1));
}

TEST(CostModel, CrossingAlone) {
    const CostModel m = round_model();
    // 8 nodes: the rings 14 messages and 1.75 S through each link; the
    // halving-doublings 6 messages and the same bytes.
    EXPECT_NEAR(crossing_seconds(m, kS, 8, false), 14e-6 + 1.75e-3, kTol);
    EXPECT_NEAR(crossing_seconds(m, kS, 8, true), 6e-6 + 1.75e-3, kTol);
    // 3 nodes: P' = 2 and the fold's 2 S.
    EXPECT_NEAR(crossing_seconds(m, kS, 3, false), 4e-6 + 4.0 / 3 * 1e-3, kTol);
    EXPECT_NEAR(crossing_seconds(m, kS, 3, true), 4e-6 + 3e-3, kTol);
}

TEST(CostModel, CrossingChoice) {
    const CostModel m = ethernet_model();
    const ChannelCost own = m.net;  // the halving-doubling timed as fast as the rings
    // Untimed: the rings, whatever the size.
    EXPECT_EQ(crossing_here(m, nullptr, 1024, 8), Schedule::hierarchical_ring);
    // Many nodes, small: its log P latencies win; at 2 nodes a tie, the
    // rings'; few nodes not a power of two, large: the fold's bytes lose.
    EXPECT_EQ(crossing_here(m, &own, 1024, 8), Schedule::hierarchical_halving_doubling);
    EXPECT_EQ(crossing_here(m, &own, 2, 1 << 20), Schedule::hierarchical_ring);
    EXPECT_EQ(crossing_here(m, &own, 3, 16 << 20), Schedule::hierarchical_ring);
    EXPECT_EQ(crossing_here(m, &own, 8, 16 << 20), Schedule::hierarchical_halving_doubling);
    // Its own alpha far above the rings' (a pause between its steps): the rings.
    const ChannelCost slow{1e-3, own.bytes_per_s};
    EXPECT_EQ(crossing_here(m, &slow, 8, 1 << 20), Schedule::hierarchical_ring);
}

TEST(CostModel, RingFormulasUnchanged) {
    const CostModel m = round_model();
    // 4 x 2 in 2 pieces: node = S/beta_shm = 0.25 ms, net = 1.5 S/beta_net;
    // per piece 2 messages in the node, 6 across.
    EXPECT_NEAR(hierarchical_seconds(m, kS, 4, 2, 2), 2 * (1e-6 + 6e-6) + 1.5e-3 + 0.25e-3 / 2, kTol);
    // 8 ranks in a flat ring: 14 messages, 1.75 S at the slower rate.
    EXPECT_NEAR(flat_ring_seconds(m, kS, 4, 2), 14e-6 + 1.75e-3, kTol);
    EXPECT_EQ(predicted_seconds(m, Schedule::flat_ring, kS, 4, 2, 2), flat_ring_seconds(m, kS, 4, 2));
    EXPECT_EQ(predicted_seconds(m, Schedule::hierarchical_ring, kS, 4, 2, 2), hierarchical_seconds(m, kS, 4, 2, 2));
}

TEST(CostModel, RingWinsLargeOnFewNodes) {
    const CostModel m = ethernet_model();
    // Not a power of two: the fold's 2 S cost more than the ring's extra
    // latencies (ring 2(P-1)/P S, halving-doubling 2(P'-1)/P' S + 2 S).
    for (int P : {3, 5, 6, 7}) {
        EXPECT_EQ(fastest_schedule(m, 16 << 20, P, 1, 1, false), Schedule::flat_ring) << P;
        EXPECT_LT(flat_ring_seconds(m, 16 << 20, P, 1), halving_doubling_seconds(m, 16 << 20, P, 1)) << P;
    }
}

TEST(CostModel, HalvingDoublingWinsSmallOnManyNodes) {
    const CostModel m = ethernet_model();
    // 1024 nodes: 20 latencies against 2046.
    EXPECT_EQ(fastest_schedule(m, 8, 1024, 1, 1, false), Schedule::flat_halving_doubling);
    EXPECT_EQ(fastest_schedule(m, 1024, 10000, 1, 1, false), Schedule::flat_halving_doubling);
    // 1024 nodes of 4: at 8 B the flat schedule's 2 steps inside the node
    // (4 messages of 2 us) beat the node's ring (6); at 1 MiB its first
    // steps put 4 ranks' halves on each link and the hierarchical one wins.
    EXPECT_EQ(fastest_schedule(m, 8, 1024, 4, 1, true), Schedule::flat_halving_doubling);
    EXPECT_EQ(fastest_schedule(m, 1 << 20, 1024, 4, 1, true), Schedule::hierarchical_halving_doubling);
    EXPECT_EQ(fastest_schedule(m, 1 << 20, 1024, 4, 1, false), Schedule::flat_halving_doubling);
}

TEST(CostModel, TiesGoToTheRing) {
    const CostModel m = ethernet_model();  // shared memory faster than the link
    // 2 nodes of 1: one exchange each way either way, the same time.
    for (double bytes : {8.0, 1024.0, 1048576.0, 16777216.0}) {
        EXPECT_EQ(flat_ring_seconds(m, bytes, 2, 1), halving_doubling_seconds(m, bytes, 2, 1)) << bytes;
        EXPECT_EQ(fastest_schedule(m, bytes, 2, 1, 1, true), Schedule::flat_ring) << bytes;
    }
    // Likewise the two hierarchical ones on 2 nodes, where they beat the
    // flat ones (a slow link, shared memory fast): the ring's wins.
    CostModel slow_link = m;
    slow_link.net.bytes_per_s = 1e8;
    slow_link.shm.bytes_per_s = 1e12;
    EXPECT_EQ(hierarchical_seconds(slow_link, 1 << 20, 2, 2, 1),
              hierarchical_halving_doubling_seconds(slow_link, 1 << 20, 2, 2, 1));
    EXPECT_EQ(fastest_schedule(slow_link, 1 << 20, 2, 2, 1, true), Schedule::hierarchical_ring);
}

TEST(CostModel, HierarchicalOnlyWhereItCanRun) {
    CostModel m = ethernet_model();
    m.net.bytes_per_s = 1e8;  // a slow link: the hierarchical schedules send the least over it
    for (int P : {2, 3, 8, 64}) {
        EXPECT_TRUE(is_hierarchical(fastest_schedule(m, 64 << 20, P, 4, 4, true))) << P;
        EXPECT_FALSE(is_hierarchical(fastest_schedule(m, 64 << 20, P, 4, 4, false))) << P;
        EXPECT_FALSE(is_hierarchical(fastest_schedule(m, 64 << 20, P, 1, 4, true))) << P;
    }
    EXPECT_STREQ(schedule_name(Schedule::flat_ring), "ring");
    EXPECT_STREQ(schedule_name(Schedule::hierarchical_ring), "hier");
    EXPECT_STREQ(schedule_name(Schedule::flat_halving_doubling), "rhd");
    EXPECT_STREQ(schedule_name(Schedule::hierarchical_halving_doubling), "hier-rhd");
}

// Points of 4.1's table for commutative operations, each at a bound and
// just below it (coll_tuned_decision_fixed.c, ompi_coll_tuned_allreduce_intra_dec_fixed).
TEST(OmpiTuned, CommutativeTable) {
    using A = OmpiAllreduce;
    expect_tuned_rule({
        // 2-3 ranks
        {2, 4, A::ring}, {2, 8, A::recursive_doubling}, {3, 4095, A::recursive_doubling}, {3, 4096, A::ring},
        {2, 8192, A::recursive_doubling}, {2, 16384, A::ring}, {2, 65536, A::segmented_ring},
        {2, 262144, A::rabenseifner},
        // 4-7, 8-15, 16-31, 32-63, 64-127
        {4, 15, A::ring}, {4, 16, A::recursive_doubling}, {7, 8191, A::recursive_doubling}, {7, 8192, A::rabenseifner},
        {8, 8191, A::recursive_doubling}, {15, 8192, A::rabenseifner},
        {16, 63, A::segmented_ring}, {16, 64, A::recursive_doubling}, {31, 4096, A::rabenseifner},
        {32, 127, A::segmented_ring}, {63, 128, A::rabenseifner},
        {64, 262143, A::recursive_doubling}, {127, 262144, A::rabenseifner},
        // 128-255, 256-511, 512-2047
        {128, 131071, A::nonoverlapping}, {255, 131072, A::recursive_doubling}, {128, 262144, A::rabenseifner},
        {256, 4095, A::nonoverlapping}, {511, 4096, A::rabenseifner},
        {512, 2047, A::nonoverlapping}, {1024, 2048, A::recursive_doubling}, {2047, 16384, A::rabenseifner},
        // 2048-4095, 4096 and more
        {2048, 2047, A::nonoverlapping}, {2048, 2048, A::segmented_ring}, {4095, 4096, A::recursive_doubling},
        {2048, 16384, A::rabenseifner},
        {4096, 2047, A::nonoverlapping}, {10000, 2048, A::segmented_ring}, {4096, 16384, A::recursive_doubling},
        {40000, 32768, A::rabenseifner},
    }, true);
}

TEST(OmpiTuned, NonCommutativeTable) {
    using A = OmpiAllreduce;
    expect_tuned_rule({
        {2, 131071, A::recursive_doubling},  {3, 131072, A::basic_linear},      {4, 1ull << 30, A::recursive_doubling},
        {8, 1048575, A::recursive_doubling}, {15, 1048576, A::nonoverlapping},  {16, 1ull << 30, A::recursive_doubling},
        {127, 8, A::recursive_doubling},     {128, 131071, A::nonoverlapping},  {128, 131072, A::recursive_doubling},
        {255, 524288, A::nonoverlapping},    {256, 4095, A::nonoverlapping},    {256, 4096, A::recursive_doubling},
        {511, 524288, A::nonoverlapping},    {512, 2047, A::nonoverlapping},    {512, 2048, A::recursive_doubling},
    }, false);
}

// What runs after coll_base_allreduce.c's own checks.
TEST(OmpiTuned, Fallbacks) {
    using A = OmpiAllreduce;
    EXPECT_EQ(ompi_tuned_allreduce_runs(A::ring, 8, 7, true), A::recursive_doubling);
    EXPECT_EQ(ompi_tuned_allreduce_runs(A::ring, 8, 8, true), A::ring);
    EXPECT_EQ(ompi_tuned_allreduce_runs(A::segmented_ring, 2, 1000, true), A::ring);  // segment size 0
    EXPECT_EQ(ompi_tuned_allreduce_runs(A::rabenseifner, 12, 7, true), A::basic_linear);  // 7 < 8
    EXPECT_EQ(ompi_tuned_allreduce_runs(A::rabenseifner, 12, 8, true), A::rabenseifner);
    EXPECT_EQ(ompi_tuned_allreduce_runs(A::rabenseifner, 12, 800, false), A::basic_linear);
    EXPECT_EQ(ompi_tuned_allreduce_runs(A::nonoverlapping, 12, 1, true), A::nonoverlapping);
    EXPECT_STREQ(ompi_allreduce_name(A::rabenseifner), "rabenseifner");
}
