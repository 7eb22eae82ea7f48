// Ring hops over UCX tag messages (algo/channel.h): any two ranks, on one
// node or across the network, host or GPU buffers.
//
// Moving and reducing the bytes of a segment is the job of a SegmentEngine
// (transport/segment_engine.h): host buffers, or GPU buffers staged through
// pinned host memory or handed to a CUDA-aware UCX.  Each direction has
// three stages per message: sends are staged (e.g. copied off the GPU),
// posted to UCX, completed; receives are posted, arrive (the engine starts
// the reduction), and finish (the reduction is done, which lets the driver
// forward the segment).  Up to `depth` messages are in flight each way.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "algo/channel.h"
#include "algo/ring.h"
#include "transport/segment_engine.h"
#include "transport/ucx.h"

namespace nexar {

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
    // Give up the send records, or the receive records and slots, for good:
    // UCX still holds requests that point into them (a peer vanished
    // mid-call and UCX would not complete them), so they must never be freed
    // or reused.  The next reserve() allocates afresh.
    void abandon_sends();
    void abandon_receives();

private:
    char* buffer_ = nullptr;
    size_t capacity_ = 0;
    size_t slot_bytes_ = 0;
    uint32_t depth_ = 0;
    std::unique_ptr<UcxRequest[]> send_requests_;
    std::unique_ptr<UcxRequest[]> recv_requests_;
};

// What a send or a receive posted to UCX is, kept until it completes.
struct UcxPending {
    Arrival arrival;  // receives
    size_t bytes = 0;
    uint64_t tag = 0;
    WireBuffer wire;  // sends: what UCX sends once the engine has staged it
};

// What either end of a UCX hop holds: the worker, the peer, the scratch
// and engine its segments go through, and its requests in flight.
class UcxHop {
protected:
    // drive_worker: progress() also progresses the worker (one channel per
    // rank does it; the other direction's may share the worker).
    UcxHop(UcxWorker& worker, int peer_rank, uint32_t depth, RingScratch& scratch, SegmentEngine& engine,
           bool drive_worker)
        : worker_(worker), peer_(peer_rank), depth_(depth ? depth : 1), scratch_(scratch), engine_(engine),
          drive_worker_(drive_worker) {}
    uint32_t slot(size_t message) const { return uint32_t(message % depth_); }

    UcxWorker& worker_;
    int peer_;
    uint32_t depth_;
    RingScratch& scratch_;
    SegmentEngine& engine_;
    bool drive_worker_;
    UcxPending pending_[kMaxRingDepth];
};

class UcxSendChannel : public SendChannel, private UcxHop {
public:
    UcxSendChannel(UcxWorker& worker, UcxEndpoint& to, int peer_rank, uint32_t depth, RingScratch& scratch,
                   SegmentEngine& engine, bool drive_worker)
        : UcxHop(worker, peer_rank, depth, scratch, engine, drive_worker), ep_(to) {}
    ChannelKind kind() const override { return ChannelKind::ucx; }
    Status start(const Departure& d, bool* started, std::string* error) override;
    Status progress(bool* moved, std::string* error) override;
    bool drained() const override { return done_ == staged_; }
    Status check_peer(std::string* error) override;
    void abort() override;
    Status finish(std::string* error) override;

private:
    UcxEndpoint& ep_;
    // staged >= posted >= done
    size_t staged_ = 0, posted_ = 0, done_ = 0;
};

class UcxRecvChannel : public RecvChannel, private UcxHop {
public:
    // `peer_pid`: the sender's process where it shares this node (0: none
    // known): UCX's endpoints on one node (shared memory, CMA) never say
    // that the peer died, so check_peer looks at the process itself.
    UcxRecvChannel(UcxWorker& worker, UcxEndpoint* from, int peer_rank, uint32_t depth, RingScratch& scratch,
                   SegmentEngine& engine, bool drive_worker, pid_t peer_pid = 0)
        : UcxHop(worker, peer_rank, depth, scratch, engine, drive_worker), ep_(from), peer_pid_(peer_pid) {}
    ChannelKind kind() const override { return ChannelKind::ucx; }
    Status post(const Arrival& a, bool* posted, std::string* error) override;
    Status progress(bool* moved, std::string* error) override;
    size_t done() const override { return done_; }
    bool drained() const override { return done_ == posted_; }
    Status check_peer(std::string* error) override;
    void abort() override;
    Status finish(std::string* error) override;

private:
    UcxEndpoint* ep_;  // watched for failure only (may be null)
    pid_t peer_pid_;
    // posted >= arrived >= done
    size_t posted_ = 0, arrived_ = 0, done_ = 0;
};

// A whole ring over UCX: what the unit tests and benchmarks drive directly.
struct RingLinks {
    UcxWorker* worker = nullptr;
    UcxEndpoint* next = nullptr;  // messages go to the next position
    UcxEndpoint* prev = nullptr;  // watched for failure only (may equal next)
    RingPeers peers;
};

// `scratch` must have been reserved for this call (ring_slot_bytes,
// options.depth; its slots are used by an in-place HostEngine only).
Status ring_allreduce(const RingLinks& links, uint32_t sequence, const void* sendbuf, void* recvbuf, size_t count,
                      DataType type, const RingOptions& options, RingScratch& scratch, SegmentEngine& engine,
                      std::string* error);
// The same on host buffers, with a HostEngine over `scratch`.
Status ring_allreduce(const RingLinks& links, uint32_t sequence, const void* sendbuf, void* recvbuf, size_t count,
                      DataType type, ReduceOp op, const RingOptions& options, RingScratch& scratch,
                      std::string* error);

}  // namespace nexar
