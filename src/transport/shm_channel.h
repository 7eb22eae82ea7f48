// Ring hops between ranks of one node through shared-memory inboxes
// (transport/shm_inbox.h), host buffers only.
//
// A send is a memcpy into a slot of the next rank's inbox; a receive
// reduces straight out of the slot into recvbuf (reduce-scatter) or copies
// it into place (allgather).  Slots are small and reused, so they stay in
// cache, and no byte goes through the kernel.  Every slot's tag and length
// are checked before use: ranks that disagree on the count get an error,
// never a write past a buffer.
//
// Where the receiver proved at setup that it may read the sender's memory
// (transport/cma.h), a send may instead record only the segment's address:
// the receiver then copies it with process_vm_readv, straight into place
// (allgather) or into its own slot, in its cache, before reducing
// (reduce-scatter).  The sender's call ends only once its successor has
// read every such segment.  Which segments travel so is the call's ShmCopy.
#pragma once

#include <sys/types.h>

#include "algo/channel.h"
#include "algo/ring.h"
#include "reduce/types.h"
#include "transport/shm_copy.h"
#include "transport/shm_inbox.h"

namespace nexar {

// Whether segments of this call (ring_slot_bytes) fit the inbox's slots.
inline bool shm_slots_fit(const ShmInbox& box, size_t count, int ranks, size_t elem_size, size_t segment_bytes) {
    return ring_slot_bytes(count, ranks, elem_size, segment_bytes) <= box.slot_bytes();
}

class ShmSendChannel : public SendChannel {
public:
    // `next`: the successor's inbox, mapped here.
    // `copy`: which segments may go by address; only where the successor
    // can read this process (ShmInbox::writer_readable).
    ShmSendChannel(ShmInbox& next, int peer_rank, ShmCopy copy = ShmCopy::slots)
        : box_(next), peer_(peer_rank), base_(next.produced().load(std::memory_order_relaxed)),
          copy_(next.writer_readable() ? copy : ShmCopy::slots) {}
    ChannelKind kind() const override { return ChannelKind::shm; }
    Status start(const char* src, size_t bytes, uint64_t tag, bool* started, std::string* error) override;
    Status progress(bool* moved, std::string* error) override;
    // A segment sent by address is complete once the successor has read it.
    bool drained() const override { return box_.consumed().load(std::memory_order_acquire) >= read_by_; }
    // Payload bytes the successor read from this process with CMA.
    uint64_t bytes_by_address() const { return bytes_by_address_; }
    Status check_peer(std::string* error) override;
    void abort() override { box_.mark_broken(); }

private:
    ShmInbox& box_;
    int peer_;
    uint64_t base_;  // the inbox's counter when the call began (only this rank writes it)
    ShmCopy copy_;
    uint64_t sent_ = 0;
    uint64_t read_by_ = 0;       // `consumed` once the last segment sent by address is read
    uint64_t seen_consumed_ = 0;
    uint64_t bytes_by_address_ = 0;
};

class ShmRecvChannel : public RecvChannel {
public:
    // `mine`: this rank's inbox; `writer_pid`: the predecessor's process,
    // watched for exit (0: not watched, NEXAR_TIMEOUT_S still is).
    ShmRecvChannel(ShmInbox& mine, int peer_rank, pid_t writer_pid, DataType type, ReduceOp op)
        : box_(mine), peer_(peer_rank), writer_pid_(writer_pid), type_(type), op_(op),
          base_(mine.consumed().load(std::memory_order_relaxed)) {}
    ChannelKind kind() const override { return ChannelKind::shm; }
    Status post(const Arrival& a, bool* posted, std::string* error) override;
    Status progress(bool* moved, std::string* error) override;
    size_t done() const override { return size_t(done_); }
    bool drained() const override { return done_ == posted_; }
    Status check_peer(std::string* error) override;
    void abort() override { box_.mark_broken(); }

private:
    ShmInbox& box_;
    int peer_;
    pid_t writer_pid_;
    DataType type_;
    ReduceOp op_;
    uint64_t base_;  // likewise, only this rank writes `consumed`
    uint64_t posted_ = 0, done_ = 0;
    Arrival expected_[kMaxRingDepth];
};

// A whole ring through shared memory: what the unit tests and benchmarks
// drive directly.
struct ShmRingLinks {
    ShmInbox* inbox = nullptr;       // this rank's, written by its predecessor
    ShmInbox* next_inbox = nullptr;  // the successor's, written by this rank
    pid_t prev_pid = 0;              // the writer of `inbox` (0: not watched)
    RingPeers peers;
    ShmCopy copy = ShmCopy::slots;   // where next_inbox->writer_readable()
};

inline bool shm_ring_fits(const ShmRingLinks& l, size_t count, size_t elem_size, size_t segment_bytes) {
    return l.inbox && l.next_inbox && shm_slots_fit(*l.inbox, count, l.peers.size, elem_size, segment_bytes) &&
           shm_slots_fit(*l.next_inbox, count, l.peers.size, elem_size, segment_bytes);
}

// Allreduces like ring_allreduce; the call must fit the slots
// (shm_ring_fits), else Status::invalid_argument.  On failure the inboxes
// are out of step: the caller must not use them again.
Status shm_ring_allreduce(const ShmRingLinks& links, uint32_t sequence, const void* sendbuf, void* recvbuf,
                          size_t count, DataType type, ReduceOp op, const RingOptions& options, std::string* error);

}  // namespace nexar
