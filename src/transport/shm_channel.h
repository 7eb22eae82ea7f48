// Ring hops between ranks of one node through shared-memory inboxes
// (transport/shm_inbox.h), host buffers only.
//
// A send is a memcpy into a slot of the next rank's inbox (with a copy
// into place in the same pass where the ring asks for one:
// Departure::copy_to); a receive reduces straight out of the slot into
// recvbuf (reduce-scatter) or copies it into place (allgather).  Slots are
// small and reused, so they stay in cache, and no byte goes through the
// kernel.  Every slot's tag and length are checked before use: ranks that
// disagree on the count get an error, never a write past a buffer.
//
// Where the receiver proved at setup that it may read the sender's memory
// (transport/cma.h), a send may instead record only the segment's address:
// the receiver then copies it with process_vm_readv, straight into place
// (allgather) or into its own slot, in its cache, before reducing
// (reduce-scatter).  The sender's call ends only once its successor has
// read every such segment.  Which segments travel so is the call's ShmCopy.
//
// With ShmCopy::push, where the sender proved at setup that it may write the
// receiver's memory, the sender writes each allgather segment straight into
// the receiver's buffer (process_vm_writev), at the place the receiver
// published for the operation, and records only that it did.  The segment
// was just reduced or arrived, so it is read from the sender's cache: the
// receiver never reads it back from memory.  The receiver's call ends only
// once no push into its buffer can be under way (ShmInbox::revoke_place).
//
// A segment passed by address or pushed needs no slot, only a record: it
// may be larger than a slot (an allgather alone sends larger ones:
// call/dispatch.cc), and start() takes it at once, even while every slot
// is taken, and queues its record until one frees up.  Otherwise the
// ring's send stream, which carries all of the reduce-scatter before the
// allgather, would hold each push back until the reduce-scatter was nearly
// over and the segment had long left the cache.
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
    // Pushing needs only that this process may write the successor's
    // (ShmInbox::owner_writable).
    ShmSendChannel(ShmInbox& next, int peer_rank, ShmCopy copy = ShmCopy::slots)
        : box_(next), peer_(peer_rank), base_(next.produced().load(std::memory_order_relaxed)),
          copy_(copy), readable_(copy != ShmCopy::slots && next.writer_readable()),
          pushes_(copy == ShmCopy::push && next.owner_writable()), queue_(next.record_queue()) {}
    ChannelKind kind() const override { return ChannelKind::shm; }
    void begin_operation(uint32_t sequence) override { operation_ = {base_ + sent_, sequence}; }
    Status start(const Departure& d, bool* started, std::string* error) override;
    Status progress(bool* moved, std::string* error) override;
    // A segment sent by address is complete once the successor has read it.
    // Every record is posted and every segment sent by address is read.
    bool drained() const override {
        return queued_ == 0 && box_.consumed().load(std::memory_order_acquire) >= read_by_;
    }
    // Payload bytes the successor read from this process with CMA.
    uint64_t bytes_by_address() const { return bytes_by_address_; }
    // Payload bytes this process wrote into the successor's buffer.
    uint64_t bytes_pushed() const { return bytes_pushed_; }
    Status check_peer(std::string* error) override;
    void abort() override { box_.mark_broken(); }

private:
    ShmInbox& box_;
    int peer_;
    uint64_t base_;  // the inbox's counter when the call began (only this rank writes it)
    ShmCopy copy_;
    bool readable_;  // the successor may read segments from here by address
    bool pushes_;    // allgather segments are pushed where the successor published its place
    PlaceKey operation_;  // which place of the successor's is this operation's
    // Queues the record of a segment that needs no slot, and posts what
    // the successor has room for.
    void queue_record(const ShmSlotRecord& r, bool* moved);
    // Posts queued records, in order, while the successor has room.
    void post_queued_records(bool* moved);

    uint64_t sent_ = 0;          // records posted
    uint64_t read_by_ = 0;       // `consumed` once the last segment sent by address is read
    // Records of segments taken but not yet posted, oldest first (in the
    // inbox mapping's ShmInbox::record_queue).
    ShmSlotRecord* queue_;
    size_t queue_first_ = 0, queued_ = 0;
    bool posted_since_progress_ = false;  // start() posted records: progress() reports the move
    uint64_t seen_consumed_ = 0;
    uint64_t bytes_by_address_ = 0;
    uint64_t bytes_pushed_ = 0;
};

class ShmRecvChannel : public RecvChannel {
public:
    // `mine`: this rank's inbox; `writer_pid`: the predecessor's process,
    // watched for exit (0: not watched, NEXAR_TIMEOUT_S still is).
    ShmRecvChannel(ShmInbox& mine, int peer_rank, pid_t writer_pid, DataType type, ReduceOp op)
        : box_(mine), peer_(peer_rank), writer_pid_(writer_pid), type_(type), op_(op),
          base_(mine.consumed().load(std::memory_order_relaxed)) {}
    ~ShmRecvChannel() override { close_place(); }
    ChannelKind kind() const override { return ChannelKind::shm; }
    // Publishes where this operation's segments go, for a writer that pushes.
    void begin_operation(uint32_t sequence, char* recvbuf, size_t bytes) override;
    Status post(const Arrival& a, bool* posted, std::string* error) override;
    Status progress(bool* moved, std::string* error) override;
    size_t done() const override { return size_t(done_); }
    bool drained() const override { return done_ == posted_; }
    Status check_peer(std::string* error) override;
    void abort() override {
        box_.mark_broken();
        close_place();
    }
    Status finish(std::string*) override {
        close_place();
        return Status::ok;
    }

private:
    ShmInbox& box_;
    int peer_;
    pid_t writer_pid_;
    DataType type_;
    ReduceOp op_;
    // Revokes the published place and waits until no push into it can be
    // under way, so that no byte lands after the call returns.
    void close_place();

    uint64_t base_;  // likewise, only this rank writes `consumed`
    bool place_open_ = false;
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
