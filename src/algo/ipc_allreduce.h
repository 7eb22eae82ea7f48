// The allreduce of device buffers whose ranks share a node, GPU to GPU
// through CUDA IPC (issue 27): no byte passes through host memory.
//
// The vector is cut into one chunk per rank.  Rank r reduces chunk r
// straight from every rank's send buffer (its own first, then the others in
// rank order) into its own receive buffer, and copies the result into every
// other rank's receive buffer: a direct reduce-scatter and allgather, one
// pass over the bytes.  At 2 ranks each rank reduces its half from both
// buffers and writes it to both.  Chunk r of any buffer is read and written
// by rank r alone, so in place is safe, and every rank gets the same bits.
//
// Ordering, across processes, by IPC events only (nothing polls device
// memory from the host):
//   1. each rank records its `input` event once the application's buffers
//      are ready (its stream waits for an event recorded on the legacy
//      default stream), and publishes on its board the call's sequence number and
//      where its buffers are (IPC descriptors);
//   2. once every board has the call, it maps the peers' buffers (the
//      cache), makes its stream wait for every peer's `input`, reduces its
//      chunk, copies it out, records its `done` event and publishes;
//   3. its stream then waits for every peer's `done` (they wrote into its
//      receive buffer), and the call ends when the stream has got there.
// A rank records `input` for call s + 1 only after call s ended for it,
// which needs every peer's `done` of s: each wait meets the record it means.
//
// Polled, like OneShotAllreduce; liveness (a peer that exited, a timeout)
// is the caller's: waiting_for() names the rank not yet there.
//
// Either half may run alone: the reduce-scatter leaves chunk r reduced in
// rank r's receive buffer only (or where IpcLayout::own_out says); the
// allgather copies each rank's chunk r of its receive buffer (or from
// IpcLayout::own_in) into every peer's.  Each half is a call of its own (a
// sequence number, both events, both boards).  They serve the
// hierarchical allreduce's node phases (call/ring_calls.h,
// IpcHierarchicalRun) and MPI_Reduce_scatter(_block) and MPI_Allgather of
// device buffers on one node, whose chunks are the MPI's blocks
// (IpcLayout::displs, counts).  "Rank" here is the index among the ranks
// that share the IPC state: on a node of a larger communicator, the local
// index.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"
#include "memory/device_api.h"
#include "memory/ipc_cache.h"
#include "reduce/types.h"

namespace nexar {

// One rank's board, in host memory every rank of the node maps.
struct IpcBoard {
    std::atomic<uint64_t> ready{0};  // the latest call whose input event and buffers are published
    std::atomic<uint64_t> done{0};   // the latest call whose writes are queued and done event recorded
    nexar_ipc_memory send[2], recv[2];  // call s's buffers in [s % 2]
};

// A rank's two IPC events: its own, or a peer's opened in this process.
struct IpcEvents {
    void* input = nullptr;
    void* done = nullptr;
};

// What one rank brings to its IPC allreduces, valid while they run.
struct IpcPeers {
    const nexar_device_api* api = nullptr;
    std::vector<IpcBoard*> boards;  // by rank
    std::vector<IpcEvents> events;  // by rank (this rank's own at `me`)
    int me = 0;
    PeerMemoryCache* cache = nullptr;
    void* stream = nullptr;       // this rank's stream for the call's work
    void* finished = nullptr;     // a local event: the call's work is done
    void* application = nullptr;  // a local event the stream waits on: the application's work is done
};

// What an IpcAllreduce does: the whole allreduce, or one half of it.
enum class IpcPart { allreduce, reduce_scatter, allgather };

// Where the chunks lie (elements; null: `count` in equal chunks), and
// where this rank's chunk goes (the reduce-scatter; null: its place in the
// receive buffer) or comes from (the allgather; null: the same).
struct IpcLayout {
    const size_t* displs = nullptr;  // by rank
    const size_t* counts = nullptr;
    char* own_out = nullptr;
    const char* own_in = nullptr;
    // The reduce-scatter's result is copied from own_out to here once every
    // peer is done reading this rank's buffers: an in-place reduce-scatter
    // leaves it where peers read their blocks.
    char* final_out = nullptr;
};

class IpcAllreduce {
public:
    // `sequence` > 0, one more than this communicator's previous IPC call.
    // sendbuf may equal recvbuf; `send_ipc` and `recv_ipc` describe them
    // (ipc_export_memory: the caller checked that both export).  The stream first waits for the work the
    // application queued on the legacy default stream (as a CUDA-aware
    // MPI's: work on its other streams must be synchronized before the call).
    IpcAllreduce(const IpcPeers& peers, uint64_t sequence, const void* sendbuf, void* recvbuf,
                 const nexar_ipc_memory& send_ipc, const nexar_ipc_memory& recv_ipc, size_t count, DataType type,
                 ReduceOp op, IpcPart part = IpcPart::allreduce, const IpcLayout& layout = IpcLayout());
    Status poll(bool* moved, std::string* error);
    bool finished() const { return stage_ == Stage::finished; }
    // The first rank whose board does not hold what this call waits for (-1: none).
    int waiting_for() const;
    // The elements of `count` that rank `rank`'s chunk starts at (rank = ranks: count).
    static size_t chunk_begin(size_t count, int rank, int ranks) { return count * size_t(rank) / size_t(ranks); }

private:
    enum class Stage { publish, reduce, collect, finishing, finished };
    Status publish(std::string* error);
    Status reduce_and_scatter(std::string* error);
    Status collect(std::string* error);
    Status failed(const char* what, std::string* error);
    // Rank `rank`'s chunk: its first element and its elements.
    std::pair<size_t, size_t> chunk(int rank) const;

    const IpcPeers& peers_;
    const uint64_t seq_;
    const char* send_;
    char* recv_;
    const nexar_ipc_memory send_ipc_, recv_ipc_;
    const size_t count_, elem_;
    const DataType type_;
    const ReduceOp op_;
    const IpcPart part_;
    const IpcLayout layout_;
    Stage stage_ = Stage::publish;
};

}  // namespace nexar
