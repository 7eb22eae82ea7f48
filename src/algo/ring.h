// Pipelined ring allreduce over UCX tag messages (host memory).
//
// Reduce-scatter then allgather, n-1 steps each.  With chunks numbered as in
// algo/partition.h, rank r at step s
//   reduce-scatter: sends chunk r-s,   receives chunk r-s-1 and reduces it;
//   allgather:      sends chunk r+1-s, receives chunk r-s straight into place.
// Every chunk is cut into segments, and the whole call is one stream of
// segment messages to the next rank and one from the previous rank.  The
// stream a rank sends is the stream it receives shifted by one chunk (its
// own chunk r first), so send k+nseg(r) may leave as soon as receive k has
// been handled: the pipeline runs across step boundaries, up to
// `depth` receives are posted ahead and `depth` sends are in flight while the
// CPU reduces the segment that just arrived.
//
// Moving and reducing the bytes of a segment is the job of a SegmentEngine
// (algo/segment_engine.h): host buffers, or GPU buffers staged through
// pinned host memory or handed to a CUDA-aware UCX.  Each direction has
// three stages per message: sends are staged (e.g. copied off the GPU),
// posted to UCX, completed; receives are posted, arrive (the engine starts
// the reduction), and finish (the reduction is done, which unblocks the send
// that forwards the segment).
//
// No allocation on the hot path: receive slots and request records live in a
// RingScratch reserved once and reused by every call on a communicator.
#pragma once

#include <chrono>
#include <cstdarg>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "core/status.h"
#include "reduce/types.h"
#include "transport/ucx.h"

namespace nexar {

class SegmentEngine;

struct RingLinks {
    UcxWorker* worker = nullptr;
    UcxEndpoint* next = nullptr;  // messages go to rank+1
    UcxEndpoint* prev = nullptr;  // watched for failure only (may equal next)
    int rank = 0;
    int size = 1;
    uint32_t context_id = 0;
};

// Both rings poll; after this many polls without progress they give their
// core away once (sched_yield).  Measured with bench/nexar-sweep: with more
// ranks than cores, pure spinning ran 4-8x slower (the peer a ring waits for
// needs the core), and at one rank per core yielding costs nothing.
constexpr unsigned kIdleSpinsBeforeYield = 64;

// Most segments one direction may have in flight.
constexpr uint32_t kMaxRingDepth = 64;

struct RingOptions {
    size_t segment_bytes = 1 << 20;
    uint32_t depth = 4;      // segments in flight per direction
    double timeout_s = 60;   // fail when nothing completes for this long; 0: never
};

// Receive slots and request records, grown on demand and kept.
class RingScratch {
public:
    RingScratch() = default;
    ~RingScratch();
    RingScratch(const RingScratch&) = delete;
    RingScratch& operator=(const RingScratch&) = delete;

    // Makes room for `depth` slots of `slot_bytes` each.  Fresh memory is
    // touched once here so page faults never land inside a ring.
    Status reserve(size_t slot_bytes, uint32_t depth);
    char* slot(uint32_t i) { return buffer_ + size_t(i) * slot_bytes_; }
    UcxRequest* send_request(uint32_t i) { return &send_requests_[i]; }
    UcxRequest* recv_request(uint32_t i) { return &recv_requests_[i]; }
    size_t bytes() const { return capacity_; }
    // Gives up this memory for good: UCX still holds requests that point into
    // it (a peer vanished mid-call and UCX would not complete them), so it
    // must never be freed or reused.  The scratch starts empty afterwards.
    void abandon();

private:
    char* buffer_ = nullptr;
    size_t capacity_ = 0;
    size_t slot_bytes_ = 0;
    uint32_t depth_ = 0;
    std::unique_ptr<UcxRequest[]> send_requests_;
    std::unique_ptr<UcxRequest[]> recv_requests_;
};

// Both rings' error text: printf into *error (when not null).
void set_ring_error(std::string* error, const char* fmt, va_list ap);

// Both rings' timeout: the error to report when nothing moved since `last`
// for longer than options.timeout_s, else an empty string.
std::string ring_timeout(const RingOptions& options, std::chrono::steady_clock::time_point last, int rank, int size,
                         size_t received, size_t sent, const char* unit);

// Bytes of scratch one call needs per pipeline slot.
size_t ring_slot_bytes(size_t count, int ranks, size_t elem_size, size_t segment_bytes);

// Allreduces `count` elements of `type` with `op` over the ring.  sendbuf may
// equal recvbuf (MPI_IN_PLACE); otherwise they must not overlap.  `scratch`
// must have been reserved for this call (ring_slot_bytes, options.depth;
// its slots are used by an in-place HostEngine only).  On failure *error explains it;
// outstanding operations have been completed or cancelled, and the `next`
// endpoint may have been closed.
Status ring_allreduce(const RingLinks& links, uint32_t sequence, const void* sendbuf, void* recvbuf, size_t count,
                      DataType type, ReduceOp op, const RingOptions& options, RingScratch& scratch,
                      SegmentEngine& engine, std::string* error);

// The same on host buffers, with a HostEngine over `scratch`.
Status ring_allreduce(const RingLinks& links, uint32_t sequence, const void* sendbuf, void* recvbuf, size_t count,
                      DataType type, ReduceOp op, const RingOptions& options, RingScratch& scratch,
                      std::string* error);

}  // namespace nexar
