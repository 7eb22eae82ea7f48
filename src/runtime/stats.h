// Per-process counters behind NEXAR_STATS and nexar_get_stats().
#pragma once

#include <atomic>
#include <cstdint>
#include <string>

namespace nexar {

struct Stats {
    std::atomic<uint64_t> ring_calls{0};
    std::atomic<uint64_t> ring_bytes{0};
    std::atomic<uint64_t> passthrough_calls{0};
    std::atomic<uint64_t> fallback_calls{0};
    // Payload bytes this rank sent, per channel kind (algo/channel.h).
    std::atomic<uint64_t> shm_bytes{0};
    std::atomic<uint64_t> ucx_bytes{0};
    // Of shm_bytes, those that went with CMA (NEXAR_SHM_COPY,
    // transport/shm_channel.h) instead of a slot: read by the successor from
    // this rank's buffers, or written by this rank into the successor's.
    std::atomic<uint64_t> cma_bytes{0};
    // Allreduces done by the hierarchical variant (algo/hierarchical.h).
    std::atomic<uint64_t> hier_calls{0};
    // Reduce-scatters and allgathers that took the ring (also in ring_calls).
    std::atomic<uint64_t> reduce_scatter_calls{0};
    std::atomic<uint64_t> allgather_calls{0};
    // Of cma_bytes, those this rank wrote into the successor's buffer
    // (NEXAR_SHM_COPY=push).
    std::atomic<uint64_t> push_bytes{0};
    // Allreduces done by the one-shot (algo/one_shot.h; also in ring_calls).
    std::atomic<uint64_t> one_shot_calls{0};
    // Allreduces of device buffers done GPU to GPU through IPC (algo/ipc_allreduce.h; also in ring_calls).
    std::atomic<uint64_t> ipc_calls{0};
    // Calls handed to an MPI that does not know CUDA with this rank's device
    // buffers staged through host memory (call/pass_through.h; also in
    // passthrough_calls or fallback_calls).
    std::atomic<uint64_t> staged_calls{0};
    // Calls of device buffers whose bytes UCX moved itself between ranks,
    // device memory to device memory (the direct path over a CUDA-aware UCX,
    // NEXAR_CUDA_PATH; also in ring_calls).
    std::atomic<uint64_t> direct_calls{0};
    std::atomic<uint64_t> mpi_bytes{0};  // payload sent over the MPI's point-to-point channel
    // Blocking calls whose agreement met on the one-shot's boards (one
    // meeting of the ranks, with the input where the call is small).
    std::atomic<uint64_t> board_agreements{0};
    // Of those, small allreduces every rank took as a call it knew
    // (call/known_one_shot.h): input and key in one publication, no task (also
    // in ring_calls, one_shot_calls and board_agreements).
    std::atomic<uint64_t> known_one_shots{0};
    // Allreduces done by the halving-doubling across nodes (algo/halving_doubling.h; also in ring_calls).
    std::atomic<uint64_t> rhd_calls{0};
};

// Process-wide counters (they outlive the runtime so that they can be read
// after MPI_Finalize).  Read them with stats_value(): the known one-shots'
// part of them is counted apart.
Stats& process_stats();

// A one-shot of `bytes` (algo/one_shot.h) that finished: counted in this
// thread's own counters, with no locked instruction (six atomic additions
// cost a sixth of an 8-byte call), and added at reading to ring_calls,
// ring_bytes, shm_bytes and one_shot_calls; a known one-shot
// (call/known_one_shot.h, `known`) to board_agreements and
// known_one_shots as well.
void count_one_shot(uint64_t bytes, bool known);

// The counters by name, in the order of the NEXAR_STATS line (DESIGN.md:
// fields are only ever appended): the line and nexar_get_counter() both
// read this table.
struct StatsField {
    const char* name;
    std::atomic<uint64_t> Stats::*member;
};
extern const StatsField kStatsFields[];
extern const size_t kStatsFieldCount;
// A counter's value: its atomic in `s` (process_stats()), and for the
// fields a known one-shot counts in, every thread's known one-shots of this
// process (a thread's latest may not be in it yet while that thread runs).
// Stats::known_one_shots's own atomic stays 0: it names the field.
uint64_t stats_value(const Stats& s, std::atomic<uint64_t> Stats::*member);

// "nexar: rank R: ring_calls=N ring_bytes=B passthrough_calls=P fallback_calls=F shm_bytes=X ucx_bytes=Y hier_calls=H cma_bytes=C reduce_scatter_calls=R allgather_calls=G push_bytes=W one_shot_calls=O ipc_calls=I staged_calls=S direct_calls=D mpi_bytes=M board_agreements=A known_one_shots=K rhd_calls=R2"
// (DESIGN.md: fields are only ever appended.)
std::string stats_line(int rank, const Stats& s);

}  // namespace nexar
