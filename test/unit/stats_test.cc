// The NEXAR_STATS line (runtime/stats.h): its fields, their order and
// spelling are a contract (DESIGN.md: only ever appended).
#include <gtest/gtest.h>

#include <string>

#include "runtime/stats.h"

namespace nexar {
namespace {

TEST(StatsLine, FieldsInTheirContractOrder) {
    // Set by member, not through the table, so that a name paired with the
    // wrong member shows.
    Stats s;
    s.ring_calls = 100, s.ring_bytes = 101, s.passthrough_calls = 102, s.fallback_calls = 103;
    s.shm_bytes = 104, s.ucx_bytes = 105, s.hier_calls = 106, s.cma_bytes = 107;
    s.reduce_scatter_calls = 108, s.allgather_calls = 109, s.push_bytes = 110, s.one_shot_calls = 111;
    s.ipc_calls = 112;
    s.staged_calls = 113;
    s.direct_calls = 114;
    s.mpi_bytes = 115;
    s.board_agreements = 116;
    s.known_one_shots = 117;
    s.rhd_calls = 118;
    EXPECT_EQ(stats_line(3, s),
              "nexar: rank 3: ring_calls=100 ring_bytes=101 passthrough_calls=102 fallback_calls=103 shm_bytes=104 "
              "ucx_bytes=105 hier_calls=106 cma_bytes=107 reduce_scatter_calls=108 allgather_calls=109 "
              "push_bytes=110 one_shot_calls=111 ipc_calls=112 staged_calls=113 direct_calls=114 mpi_bytes=115 "
              "board_agreements=116 known_one_shots=117 rhd_calls=118");
}

TEST(StatsLine, EveryCounterHasOneField) {
    // Each member appears once in the table (the line would repeat or miss one).
    Stats s;
    for (size_t i = 0; i < kStatsFieldCount; ++i) {
        (s.*kStatsFields[i].member).fetch_add(1);
        for (size_t j = 0; j < kStatsFieldCount; ++j)
            EXPECT_EQ((s.*kStatsFields[j].member).load(), j <= i ? 1u : 0u) << kStatsFields[i].name;
    }
    EXPECT_EQ(sizeof(Stats), kStatsFieldCount * sizeof(std::atomic<uint64_t>));
}

}  // namespace
}  // namespace nexar
