#include "runtime/stats.h"

namespace nexar {

Stats& process_stats() {
    static Stats stats;
    return stats;
}

const StatsField kStatsFields[] = {
    {"ring_calls", &Stats::ring_calls},
    {"ring_bytes", &Stats::ring_bytes},
    {"passthrough_calls", &Stats::passthrough_calls},
    {"fallback_calls", &Stats::fallback_calls},
    {"shm_bytes", &Stats::shm_bytes},
    {"ucx_bytes", &Stats::ucx_bytes},
    {"hier_calls", &Stats::hier_calls},
    {"cma_bytes", &Stats::cma_bytes},
    {"reduce_scatter_calls", &Stats::reduce_scatter_calls},
    {"allgather_calls", &Stats::allgather_calls},
    {"push_bytes", &Stats::push_bytes},
    {"one_shot_calls", &Stats::one_shot_calls},
    {"ipc_calls", &Stats::ipc_calls},
    {"staged_calls", &Stats::staged_calls},
    {"direct_calls", &Stats::direct_calls},
    {"mpi_bytes", &Stats::mpi_bytes},
    {"board_agreements", &Stats::board_agreements},
    {"known_one_shots", &Stats::known_one_shots},
};
const size_t kStatsFieldCount = sizeof kStatsFields / sizeof kStatsFields[0];

std::string stats_line(int rank, const Stats& s) {
    std::string line = "nexar: rank " + std::to_string(rank) + ":";
    for (size_t i = 0; i < kStatsFieldCount; ++i)
        line += std::string(" ") + kStatsFields[i].name + "=" + std::to_string((s.*kStatsFields[i].member).load());
    return line;
}

}  // namespace nexar
