#include "runtime/stats.h"

#include <mutex>
#include <vector>

namespace nexar {

namespace {

// One thread's one-shots: written by that thread only (a load and a
// store, no locked add), read by any.  `known`: those of them that were
// known one-shots.
struct KnownOneShotCounts {
    std::atomic<uint64_t> calls{0}, bytes{0}, known{0};
};
// Every live thread's counts, and what threads that ended had counted.
struct KnownOneShotRegistry {
    std::mutex mutex;
    std::vector<KnownOneShotCounts*> threads;
    uint64_t ended_calls = 0, ended_bytes = 0, ended_known = 0;
};
KnownOneShotRegistry& known_registry() {
    static auto* r = new KnownOneShotRegistry;  // never destroyed: threads may end after exit() began
    return *r;
}
struct ThreadKnownOneShots {
    KnownOneShotCounts counts;
    ThreadKnownOneShots() {
        KnownOneShotRegistry& r = known_registry();
        std::lock_guard<std::mutex> lock(r.mutex);
        r.threads.push_back(&counts);
    }
    ~ThreadKnownOneShots() {
        KnownOneShotRegistry& r = known_registry();
        std::lock_guard<std::mutex> lock(r.mutex);
        r.ended_calls += counts.calls.load(std::memory_order_relaxed);
        r.ended_bytes += counts.bytes.load(std::memory_order_relaxed);
        r.ended_known += counts.known.load(std::memory_order_relaxed);
        for (size_t i = 0; i < r.threads.size(); ++i)
            if (r.threads[i] == &counts) r.threads.erase(r.threads.begin() + long(i));
    }
};
thread_local ThreadKnownOneShots t_known_one_shots;

void one_shot_totals(uint64_t* calls, uint64_t* bytes, uint64_t* known) {
    KnownOneShotRegistry& r = known_registry();
    std::lock_guard<std::mutex> lock(r.mutex);
    *calls = r.ended_calls, *bytes = r.ended_bytes, *known = r.ended_known;
    for (const KnownOneShotCounts* c : r.threads) {
        *calls += c->calls.load(std::memory_order_relaxed);
        *bytes += c->bytes.load(std::memory_order_relaxed);
        *known += c->known.load(std::memory_order_relaxed);
    }
}

void add_here(std::atomic<uint64_t>& counter, uint64_t n) {
    counter.store(counter.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
}

}  // namespace

void count_one_shot(uint64_t bytes, bool known) {
    KnownOneShotCounts& c = t_known_one_shots.counts;
    add_here(c.calls, 1);
    add_here(c.bytes, bytes);
    if (known) add_here(c.known, 1);
}

uint64_t stats_value(const Stats& s, std::atomic<uint64_t> Stats::*member) {
    uint64_t v = (s.*member).load();
    const bool calls = member == &Stats::ring_calls || member == &Stats::one_shot_calls;
    const bool known = member == &Stats::board_agreements || member == &Stats::known_one_shots;
    const bool bytes = member == &Stats::ring_bytes || member == &Stats::shm_bytes;
    if (calls || known || bytes) {
        uint64_t one_shot_calls = 0, one_shot_bytes = 0, known_calls = 0;
        one_shot_totals(&one_shot_calls, &one_shot_bytes, &known_calls);
        v += calls ? one_shot_calls : known ? known_calls : one_shot_bytes;
    }
    return v;
}

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
    {"rhd_calls", &Stats::rhd_calls},
};
const size_t kStatsFieldCount = sizeof kStatsFields / sizeof kStatsFields[0];

std::string stats_line(int rank, const Stats& s) {
    std::string line = "nexar: rank " + std::to_string(rank) + ":";
    for (size_t i = 0; i < kStatsFieldCount; ++i)
        line += std::string(" ") + kStatsFields[i].name + "=" + std::to_string(stats_value(s, kStatsFields[i].member));
    return line;
}

}  // namespace nexar
