// Ring hops over UCX tag messages (algo/channel.h): any two ranks, on one
// node or across the network, host or GPU buffers (a CUDA-aware UCX moves
// device memory itself).  The stages of a message and the segment engine's
// part are transport/message_channel.h's; here is what UCX does for them.
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>

#include "algo/channel.h"
#include "algo/ring.h"
#include "transport/message_channel.h"
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
    UcxRequest* send_request(uint32_t i) { return &(send_requests_ ? send_requests_.get() : abandoned_sends_)[i]; }
    UcxRequest* recv_request(uint32_t i) { return &(recv_requests_ ? recv_requests_.get() : abandoned_receives_)[i]; }
    size_t bytes() const { return capacity_; }
    // Give up the send records, or the receive records and slots, for good:
    // UCX still holds requests that point into them (a peer vanished
    // mid-call and UCX would not complete them), so they must never be freed
    // or reused.  The next reserve() allocates afresh; until then the
    // records stay readable (another channel of the same failed call, on
    // another bank of slots, still aborts its own).
    void abandon_sends();
    void abandon_receives();

private:
    char* buffer_ = nullptr;
    size_t capacity_ = 0;
    size_t slot_bytes_ = 0;
    uint32_t depth_ = 0;
    std::unique_ptr<UcxRequest[]> send_requests_;
    std::unique_ptr<UcxRequest[]> recv_requests_;
    UcxRequest* abandoned_sends_ = nullptr;  // kept forever, read until the next reserve()
    UcxRequest* abandoned_receives_ = nullptr;
};

// The two directions of a UCX hop (transport/message_channel.h): the
// worker, the peer, and the scratch whose request records its messages use.
class UcxSendPort final : public MessagePort {
public:
    // drive_worker: progress() also progresses the worker (one port per
    // rank does it; the other direction's may share the worker).
    UcxSendPort(UcxWorker& worker, UcxEndpoint& to, int peer_rank, RingScratch& scratch, bool drive_worker)
        : worker_(worker), ep_(to), peer_(peer_rank), scratch_(scratch), drive_worker_(drive_worker) {}
    ChannelKind kind() const override { return ChannelKind::ucx; }
    Status post_send(uint32_t slot, const WireBuffer& wire, size_t bytes, uint64_t tag, std::string* error) override;
    Status post_recv(uint32_t, const WireBuffer&, size_t, uint64_t, std::string*) override {
        return Status::invalid_argument;
    }
    void progress() override {
        if (drive_worker_) worker_.progress();
    }
    Status send_done(uint32_t slot, bool* done, std::string* error) override;
    Status recv_done(uint32_t, size_t, bool*, std::string*) override { return Status::invalid_argument; }
    Status check_peer(std::string* error) override;
    void abort(size_t first, size_t last, SlotBank bank) override;

private:
    UcxWorker& worker_;
    UcxEndpoint& ep_;
    int peer_;
    RingScratch& scratch_;
    bool drive_worker_;
};

class UcxRecvPort final : public MessagePort {
public:
    // `from`: watched for failure only (may be null).  `peer_pid`: the
    // sender's process where it shares this node (0: none known): UCX's
    // endpoints on one node (shared memory, CMA) never say that the peer
    // died, so check_peer looks at the process itself.
    UcxRecvPort(UcxWorker& worker, UcxEndpoint* from, int peer_rank, RingScratch& scratch, bool drive_worker,
                pid_t peer_pid)
        : worker_(worker), ep_(from), peer_(peer_rank), scratch_(scratch), drive_worker_(drive_worker),
          peer_pid_(peer_pid) {}
    ChannelKind kind() const override { return ChannelKind::ucx; }
    Status post_send(uint32_t, const WireBuffer&, size_t, uint64_t, std::string*) override {
        return Status::invalid_argument;
    }
    Status post_recv(uint32_t slot, const WireBuffer& wire, size_t bytes, uint64_t tag, std::string* error) override;
    void progress() override {
        if (drive_worker_) worker_.progress();
    }
    Status send_done(uint32_t, bool*, std::string*) override { return Status::invalid_argument; }
    Status recv_done(uint32_t slot, size_t expected, bool* done, std::string* error) override;
    Status check_peer(std::string* error) override;
    void abort(size_t first, size_t last, SlotBank bank) override;

private:
    UcxWorker& worker_;
    UcxEndpoint* ep_;
    int peer_;
    RingScratch& scratch_;
    bool drive_worker_;
    pid_t peer_pid_;
};

// A ring hop over UCX, each direction a channel with its port (a base
// before the channel's, so built first).
struct UcxSendPortHolder {
    UcxSendPort port;
};
class UcxSendChannel final : private UcxSendPortHolder, public MessageSendChannel {
public:
    UcxSendChannel(UcxWorker& worker, UcxEndpoint& to, int peer_rank, SlotBank slots, RingScratch& scratch,
                   SegmentEngine& engine, bool drive_worker)
        : UcxSendPortHolder{UcxSendPort(worker, to, peer_rank, scratch, drive_worker)},
          MessageSendChannel(port, engine, slots) {}
};

struct UcxRecvPortHolder {
    UcxRecvPort port;
};
class UcxRecvChannel final : private UcxRecvPortHolder, public MessageRecvChannel {
public:
    UcxRecvChannel(UcxWorker& worker, UcxEndpoint* from, int peer_rank, SlotBank slots, RingScratch& scratch,
                   SegmentEngine& engine, bool drive_worker, pid_t peer_pid = 0)
        : UcxRecvPortHolder{UcxRecvPort(worker, from, peer_rank, scratch, drive_worker, peer_pid)},
          MessageRecvChannel(port, engine, slots) {}
};

// A whole ring over UCX: what the unit tests and benchmarks drive directly.
struct RingLinks {
    UcxWorker* worker = nullptr;
    UcxEndpoint* next = nullptr;  // messages go to the next position
    UcxEndpoint* prev = nullptr;  // watched for failure only (may equal next)
    RingPeers peers;
};

// `scratch` must have been reserved for this call (ring_slot_bytes,
// options.depth; a HostEngine uses its slots only in place).
Status ring_allreduce(const RingLinks& links, uint32_t sequence, const void* sendbuf, void* recvbuf, size_t count,
                      DataType type, const RingOptions& options, RingScratch& scratch, SegmentEngine& engine,
                      std::string* error);
// The same on host buffers, with a HostEngine over `scratch`.
Status ring_allreduce(const RingLinks& links, uint32_t sequence, const void* sendbuf, void* recvbuf, size_t count,
                      DataType type, ReduceOp op, const RingOptions& options, RingScratch& scratch,
                      std::string* error);

}  // namespace nexar
