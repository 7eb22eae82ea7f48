#include "core/stats.h"

#include <cinttypes>
#include <cstdio>

namespace nexar {

Stats& process_stats() {
    static Stats stats;
    return stats;
}

std::string stats_line(int rank, const Stats& s) {
    char buf[384];
    snprintf(buf, sizeof buf,
             "nexar: rank %d: ring_calls=%" PRIu64 " ring_bytes=%" PRIu64 " passthrough_calls=%" PRIu64
             " fallback_calls=%" PRIu64 " shm_bytes=%" PRIu64 " ucx_bytes=%" PRIu64 " hier_calls=%" PRIu64 " cma_bytes=%" PRIu64
             " reduce_scatter_calls=%" PRIu64 " allgather_calls=%" PRIu64 " push_bytes=%" PRIu64,
             rank, s.ring_calls.load(), s.ring_bytes.load(), s.passthrough_calls.load(), s.fallback_calls.load(),
             s.shm_bytes.load(), s.ucx_bytes.load(), s.hier_calls.load(), s.cma_bytes.load(),
             s.reduce_scatter_calls.load(), s.allgather_calls.load(), s.push_bytes.load());
    return buf;
}

}  // namespace nexar
