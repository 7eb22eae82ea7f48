#include "transport/shm_channel.h"

#include <sched.h>
#include <signal.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>

#include "algo/tag.h"
#include "base/log.h"
#include "memory/host_copy.h"
#include "reduce/host_reduce.h"
#include "transport/cma.h"

namespace nexar {

namespace {

Status peer_exited(int rank, pid_t pid, std::string* error) {
    char buf[96];
    snprintf(buf, sizeof buf, "rank %d (process %d) has exited", rank, int(pid));
    *error = buf;
    return Status::peer_failure;
}

// The neighbour stopped the ring on its side (its own error is in its log).
Status peer_gave_up(int rank, std::string* error) {
    char buf[128];
    snprintf(buf, sizeof buf, "a ring on rank %d failed (shared memory): the error is in rank %d's log", rank, rank);
    *error = buf;
    return Status::peer_failure;
}

}  // namespace

Status ShmSendChannel::start(const Departure& d, bool* started, std::string* error) {
    *started = false;
    post_queued_records(&posted_since_progress_);
    // Which way this segment travels: allgather segments may be pushed
    // into the successor's buffer, or read by it from here; reduce-scatter
    // segments only read (cma, push).
    const bool gather = copy_ != ShmCopy::slots && unpack_tag(d.tag).phase == 1;
    const bool by_address_allowed = readable_ && (gather || copy_ >= ShmCopy::cma);
    if (queued_ < ShmInbox::kMaxQueuedRecords) {
        bool pushed = false;
        if (gather && pushes_) {
            std::string why;
            if (!ok(box_.push(operation_, d.offset, d.src, d.bytes, &pushed, &why))) {
                // The probe read the successor, but the kernel refuses the
                // write (a seccomp profile that allows reads only): stop
                // pushing.  Whatever part landed is overwritten when the
                // segment goes by address or through a slot below.
                pushes_ = false;
                box_.set_owner_writable(false);
                NEXAR_INFO("allgather segments to rank %d are read by it from now on, not pushed: %s", peer_,
                           why.c_str());
            }
        }
        const bool by_address = !pushed && by_address_allowed;
        if (pushed || by_address) {
            // By address, the bytes stay at `src` until the successor has
            // read them (drained()).
            queue_record({d.tag, d.bytes, pushed ? kPushedToPlace : uint64_t(reinterpret_cast<uintptr_t>(d.src))},
                         &posted_since_progress_);
            (pushed ? bytes_pushed_ : bytes_by_address_) += d.bytes;
            bytes_sent_ += d.bytes;
            // After a push the bytes are in cache; by address they are
            // read from memory here.
            if (d.copy_to) copy_result(d.copy_to, d.src, d.bytes, d.stream);
            *started = true;
            return Status::ok;
        }
    }
    // A segment through a slot follows every earlier record.
    uint64_t m = base_ + sent_;
    if (queued_ > 0 || box_.consumed().load(std::memory_order_acquire) + box_.depth() <= m) return Status::ok;
    // Only a segment through a slot must fit one.  A larger one waits to go
    // by address (for room in the record queue) or to be pushed (for the
    // successor's place); otherwise it cannot travel at all.
    if (d.bytes > box_.slot_bytes()) {
        if (by_address_allowed || (gather && pushes_)) return Status::ok;
        *error = "a segment is larger than the shared-memory slots";
        if (gather && copy_ == ShmCopy::push)
            *error += ", and the push into rank " + std::to_string(peer_) + "'s buffer was refused";
        return Status::invalid_argument;
    }
    if (d.copy_to)
        copy_twice(box_.slot(m), d.copy_to, d.src, d.bytes, d.stream);  // one read of src for both
    else
        memcpy(box_.slot(m), d.src, d.bytes);
    box_.record(m) = ShmSlotRecord{d.tag, d.bytes, 0};
    box_.produced().store(m + 1, std::memory_order_release);
    ++sent_;
    bytes_sent_ += d.bytes;
    *started = true;
    return Status::ok;
}

void ShmSendChannel::queue_record(const ShmSlotRecord& r, bool* moved) {
    queue_[(queue_first_ + queued_) % ShmInbox::kMaxQueuedRecords] = r;
    ++queued_;
    post_queued_records(moved);
}

void ShmSendChannel::post_queued_records(bool* moved) {
    if (queued_ == 0) return;
    const uint64_t consumed = box_.consumed().load(std::memory_order_acquire);
    while (queued_ > 0 && consumed + box_.depth() > base_ + sent_) {
        const uint64_t m = base_ + sent_;
        const ShmSlotRecord& r = queue_[queue_first_];
        box_.record(m) = r;
        if (r.remote != kPushedToPlace) read_by_ = m + 1;
        box_.produced().store(m + 1, std::memory_order_release);
        ++sent_;
        queue_first_ = (queue_first_ + 1) % ShmInbox::kMaxQueuedRecords;
        --queued_;
        *moved = true;
    }
}

Status ShmSendChannel::progress(bool* moved, std::string*) {
    if (posted_since_progress_) *moved = true;
    posted_since_progress_ = false;
    post_queued_records(moved);
    // Segments sent by address wait on the successor.
    if (seen_consumed_ < read_by_) {
        uint64_t c = box_.consumed().load(std::memory_order_acquire);
        if (c != seen_consumed_) *moved = true;
        seen_consumed_ = c;
    }
    return Status::ok;
}

Status ShmSendChannel::check_peer(std::string* error) {
    if (box_.broken()) return peer_gave_up(peer_, error);
    return process_gone(box_.owner_pid()) ? peer_exited(peer_, box_.owner_pid(), error) : Status::ok;
}

void ShmRecvChannel::begin_operation(uint32_t sequence, char* recvbuf, size_t bytes) {
    close_place();  // an operation that ended without finish() or abort()
    box_.publish_place({base_ + done_, sequence}, recvbuf, bytes);
    place_open_ = true;
}

void ShmRecvChannel::close_place() {
    if (!place_open_) return;
    place_open_ = false;
    box_.revoke_place();
    // A push copies one segment: this waits a fraction of a millisecond, or
    // until the writer is gone.  A writer that cannot be watched gets a
    // second (it could not have pushed: it could not see this process).  A
    // writer stopped in the middle of a push (a hung node, only after its
    // ring failed) is not waited for: the call returns its error, and the
    // user is told the buffer may still change should that rank go on.
    auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(1);
    while (box_.pushing() && !process_gone(writer_pid_) &&
           (writer_pid_ > 0 || std::chrono::steady_clock::now() < give_up)) {
        if (process_stopped(writer_pid_)) {
            NEXAR_WARN("rank %d was stopped while writing into this rank's receive buffer: that buffer may still "
                       "change should rank %d be continued",
                       peer_, peer_);
            return;
        }
        sched_yield();
    }
}

Status ShmRecvChannel::post(const Arrival& a, bool* posted, std::string*) {
    *posted = posted_ - done_ < kMaxRingDepth;
    if (*posted) expected_[posted_++ % kMaxRingDepth] = a;
    return Status::ok;
}

Status ShmRecvChannel::progress(bool* moved, std::string* error) {
    if (done_ == posted_) return Status::ok;
    uint64_t m = base_ + done_;
    if (box_.produced().load(std::memory_order_acquire) <= m) return Status::ok;
    const Arrival& a = expected_[done_ % kMaxRingDepth];
    const ShmSlotRecord rec = box_.record(m);
    if (rec.tag != a.tag || rec.bytes != a.bytes) {
        TagFields got = unpack_tag(rec.tag), want = unpack_tag(a.tag);
        char buf[512];
        snprintf(buf, sizeof buf,
                 "rank %d sent a segment of %llu bytes for call %u phase %u step %u segment %u where "
                 "%zu bytes of call %u phase %u step %u segment %u were expected: do all ranks pass the same count?",
                 peer_, (unsigned long long)rec.bytes, unsigned(got.sequence), unsigned(got.phase), unsigned(got.step),
                 unsigned(got.segment), a.bytes, unsigned(want.sequence), unsigned(want.phase), unsigned(want.step),
                 unsigned(want.segment));
        *error = buf;
        return Status::mismatch;
    }
    // A pushed segment is in place already; one sent by address is read
    // from the writer's memory: into place, or into this slot (in this
    // core's cache) to be reduced from.
    const char* payload = box_.slot(m);
    if (rec.remote == kPushedToPlace) {
        if (a.reduce) {
            char buf[160];
            snprintf(buf, sizeof buf, "rank %d wrote a segment into this rank's buffer where one to reduce was expected",
                     peer_);
            *error = buf;
            return Status::mismatch;
        }
    } else if (rec.remote != 0) {
        std::string why;
        Status s = writer_pid_ > 0 ? cma_read(writer_pid_, a.reduce ? box_.slot(m) : a.place, rec.remote, a.bytes, &why)
                                   : (why = "its process is not visible from here", Status::peer_failure);
        if (!ok(s)) {
            char buf[384];
            snprintf(buf, sizeof buf, "cannot read rank %d's segment from its memory: %s", peer_, why.c_str());
            *error = buf;
            return s;
        }
        // The writer marks the inbox broken before its call returns: a
        // segment read before that was read while its bytes were still put.
        std::atomic_thread_fence(std::memory_order_seq_cst);
        if (box_.broken()) return peer_gave_up(peer_, error);
    }
    if (a.reduce) {
        Status s = host_reduce(a.place, a.input, payload, a.count, type_, op_);
        if (!ok(s)) {
            *error = std::string("no host reduction for ") + datatype_name(type_) + " " + reduce_op_name(op_);
            return s;
        }
    } else if (rec.remote == 0) {
        copy_result(a.place, payload, a.bytes, a.stream);
    }
    box_.consumed().store(m + 1, std::memory_order_release);
    ++done_;
    *moved = true;
    return Status::ok;
}

Status ShmRecvChannel::check_peer(std::string* error) {
    if (box_.broken()) return peer_gave_up(peer_, error);
    return process_gone(writer_pid_) ? peer_exited(peer_, writer_pid_, error) : Status::ok;
}

Status shm_ring_allreduce(const ShmRingLinks& links, uint32_t sequence, const void* sendbuf, void* recvbuf,
                          size_t count, DataType type, ReduceOp op, const RingOptions& options, std::string* error) {
    if (!op_supported(type, op) || !shm_ring_fits(links, count, datatype_size(type), options.segment_bytes))
        return Status::invalid_argument;
    ShmSendChannel out(*links.next_inbox, links.peers.next_rank, links.copy);
    ShmRecvChannel in(*links.inbox, links.peers.prev_rank, links.prev_pid, type, op);
    return ring_allreduce(links.peers, sequence, sendbuf, recvbuf, count, type, options, out, in, error);
}

}  // namespace nexar
