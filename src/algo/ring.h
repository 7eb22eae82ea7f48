// The pipelined ring allreduce, driven over two channels (algo/channel.h).
//
// Reduce-scatter then allgather, n-1 steps each.  With chunks numbered as in
// algo/partition.h, the rank at ring position p at step s
//   reduce-scatter: sends chunk p-s,   receives chunk p-s-1 and reduces it;
//   allgather:      sends chunk p+1-s, receives chunk p-s straight into place.
// Every chunk is cut into segments, and the whole call is one stream of
// segment messages to the next rank and one from the previous rank
// (algo/ring_schedule.h).  The stream a rank sends is the stream it receives
// shifted by one chunk (its own chunk p first), so send k+nseg(p) may leave
// as soon as receive k is done: the pipeline runs across step boundaries,
// receives are announced ahead and sends are in flight while the segment
// that just arrived is reduced.
//
// Positions follow the topology (algo/topology.h): the caller passes this
// rank's position and its neighbours' ranks; chunk ownership follows the
// position.
//
// No allocation on the hot path: the driver keeps counters only, channels
// keep their slots and request records from call to call.
#pragma once

#include <algorithm>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "algo/channel.h"
#include "algo/ring_schedule.h"
#include "algo/tag.h"
#include "base/status.h"
#include "reduce/types.h"

namespace nexar {

// Rings poll; after this many polls without progress they give their core
// away once (sched_yield).  Measured with bench/nexar-sweep: with more ranks
// than cores, pure spinning ran 4-8x slower (the peer a ring waits for needs
// the core), and at one rank per core yielding costs nothing.
constexpr unsigned kIdleSpinsBeforeYield = 64;
// ...but where the node holds no more ranks than CPUs, a yield hands the
// core to whatever else runs there, not to a peer: with a busy process
// beside 2 ranks on 2 cores, yields every 64 polls took a 16 KiB allreduce
// 15-260 us, every 2^20 polls 3-5 us (the MPI's: 14-26 us).  Waits there
// yield this rarely.
constexpr unsigned kIdleSpinsBeforeRareYield = 1u << 20;
// Which of the two idle waits give: set by the runtime at start-up
// (NEXAR_YIELD, runtime/config.h); often until then.
void set_idle_yield(bool often);
// Idle polls between looks at the clock for a check for stalls.
constexpr unsigned kIdleSpinsBetweenChecks = 1024;
// A check for stalls reads the peers' state (/proc) and costs a few
// microseconds: none before an idle period is this old, and at most one
// per this much time.  (A round count alone checked a nonblocking call,
// which looks every 64 rounds, in nearly every gap between two segments:
// 5-20 % of a persistent ring call at 64 KiB-1 MiB.)
constexpr auto kStallCheckInterval = std::chrono::milliseconds(5);

// Most segments one direction may have in flight.
constexpr uint32_t kMaxRingDepth = 64;

struct RingOptions {
    size_t segment_bytes = 1 << 20;
    uint32_t depth = 4;      // segments in flight per direction (UCX channels)
    double timeout_s = 60;   // fail when nothing completes for this long; 0: never
    // Copy settled results past the cache (Arrival::stream).  The
    // dispatcher decides per call, from NEXAR_STREAM_BYTES.
    bool stream_results = false;
    // No timeout before the first message from the predecessor: a ring
    // started with no agreement before it (a persistent call's MPI_Start)
    // may wait for a peer that starts later, as MPI's own calls do.
    bool patient_start = false;
};

// This rank's place on the ring.
struct RingPeers {
    int position = 0;   // 0 .. size-1: which chunk is this rank's own
    int size = 1;
    int prev_rank = 0;  // communicator ranks of the neighbours, for messages
    int next_rank = 0;
    // The tag id of a stream is its receiver's (algo/tag.h): the
    // successor's for what this rank sends, this rank's for what it receives.
    uint32_t send_tag_id = 0;
    uint32_t recv_tag_id = 0;
};

// Bytes of the largest segment of a call over `layout` (sizes slots and
// scratch); ring_slot_bytes for equal chunks.
size_t layout_slot_bytes(const ChunkLayout& layout, size_t elem_size, size_t segment_bytes);
size_t ring_slot_bytes(size_t count, int ranks, size_t elem_size, size_t segment_bytes);

// One ring in flight: set up by its constructor, moved along by poll()
// until finished().  A blocking call loops on one (ring_allreduce below);
// the hierarchical allreduce drives a ring inside the node and one across
// nodes at the same time.  It keeps copies of its peers and options; the
// buffers and channels are the caller's and must outlive it.  Channels may
// serve one operation after another (their counters run on), never two at
// once.
class RingOperation {
public:
    RingOperation(const RingPeers& peers, uint32_t sequence, const void* sendbuf, void* recvbuf, size_t count,
                  DataType type, const RingOptions& options, SendChannel& to_next, RecvChannel& from_prev,
                  RingPhases phases = RingPhases::allreduce)
        : RingOperation(peers, sequence, sendbuf, recvbuf, ChunkLayout::equal(count, size_t(peers.size)), type,
                        options, to_next, from_prev, phases) {}
    // The same over any layout of the chunks (algo/partition.h); its spans
    // must outlive the operation.
    RingOperation(const RingPeers& peers, uint32_t sequence, const void* sendbuf, void* recvbuf,
                  const ChunkLayout& layout, DataType type, const RingOptions& options, SendChannel& to_next,
                  RecvChannel& from_prev, RingPhases phases = RingPhases::allreduce);
    // Moves along whatever can move; sets *moved when something did.  On
    // failure *error explains it and both channels have been aborted.
    Status poll(bool* moved, std::string* error);
    // Every message sent and received and the channels' work finished.
    bool finished() const { return finished_; }
    // While nothing moves: an error when a peer is known dead, or when
    // nothing moved since `idle_since` for longer than the timeout.
    Status check_stall(std::chrono::steady_clock::time_point idle_since, std::string* error);
    // Stops both channels (another operation failed).
    void abort() { fail(Status::ok); }
    // Whether a message from the predecessor has arrived.
    bool heard_from_peer() const { return received() > 0; }
    // RingOptions::patient_start no longer holds: another part of the same
    // call has heard from its peers, so this ring's silence is a stall
    // (the hierarchical allreduce's later rings; without it a persistent
    // call whose peers stopped between two rings would wait forever).
    void end_patience() { opt_.patient_start = false; }
    // A reduce-scatter run alone: its last step reduces this rank's own
    // chunk into `out` (the chunk's first element at out[0]) instead of
    // recvbuf, so that out of place the result goes straight into the
    // caller's small receive buffer.  `out` must not overlap sendbuf, nor
    // the parts of recvbuf the ring writes (at 2 ranks it writes none, and
    // recvbuf may be `out` itself).  Ignored for other phases.  Call before
    // the first poll().
    void land_own_chunk_in(char* out) { own_out_ = phases_ == RingPhases::reduce_scatter ? out : nullptr; }

private:
    uint64_t send_tag(const RingCursor& c) const { return ring_tag(p_.send_tag_id, seq_, c); }
    uint64_t recv_tag(const RingCursor& c) const { return ring_tag(p_.recv_tag_id, seq_, c); }
    size_t received() const { return in_.done() - recv_base_; }
    Status announce_receives(std::string* error);
    Status start_sends(bool* moved, std::string* error);
    Status fail(Status s);

    RingPeers p_;
    uint32_t seq_;
    const char* send_;
    char* recv_;
    size_t esz_;
    RingOptions opt_;
    SendChannel& out_;
    RecvChannel& in_;
    RingPhases phases_;
    RingCursor send_cursor_, recv_cursor_;
    size_t own_segments_ = 0;
    char* own_out_ = nullptr;       // land_own_chunk_in
    const char* own_in_ = nullptr;  // an allgather's own chunk out of place: sendbuf (see ring_run)
    Span own_chunk_;                // the chunk the reduce-scatter leaves reduced here
    size_t sent_ = 0;       // messages started
    size_t recv_base_ = 0;  // from_prev.done() when this ring began
    bool finished_ = false;
};

// Since when one thing polled round after round has not moved: idle
// rounds counted, the clock read once per idle period, at its first round
// (never while things move).  Read at the first idle round, not after a
// number of them: where rounds are slow (a progress thread that naps
// between them) a count would start the clock late by that many naps.
class IdleClock {
public:
    // After each round; the idle rounds so far (0 after a move).
    unsigned after_round(bool moved);
    // The start of the idle period where it is long enough to be timed,
    // else `otherwise`.  Where several parts are polled together (the
    // hierarchical allreduce's rings, a blocking call beside nonblocking
    // ones), each part's own: a part that moves does not hide another's
    // stall, and no stall's time restarts because something else moved.
    std::chrono::steady_clock::time_point idle_since_or(std::chrono::steady_clock::time_point otherwise) const {
        return idle_ > 0 ? std::min(idle_since_, otherwise) : otherwise;
    }
    std::chrono::steady_clock::time_point idle_since() const { return idle_since_; }

private:
    unsigned idle_ = 0;
    std::chrono::steady_clock::time_point idle_since_;
};

// The idle side of a polling loop: its IdleClock, the core given away now
// and then, and a check for stalls once the loop has been idle for
// kStallCheckInterval, and every kStallCheckInterval after that, the clock
// read every `check_every` idle rounds (a loop whose rounds are slow looks
// more often: nonblocking calls' engine).
class IdleBackoff {
public:
    explicit IdleBackoff(unsigned check_every = kIdleSpinsBetweenChecks,
                         std::chrono::steady_clock::duration interval = kStallCheckInterval)
        : check_every_(check_every), interval_(interval) {}
    // After each round; true when the caller should check for stalls.
    bool after_round(bool moved);
    std::chrono::steady_clock::time_point idle_since() const { return clock_.idle_since(); }

private:
    IdleClock clock_;
    unsigned check_every_;
    std::chrono::steady_clock::duration interval_;
    std::chrono::steady_clock::time_point last_check_{};
};

// Polls `op` (a RingOperation, or anything with its poll, finished and
// check_stall) to its end, giving the core away while nothing moves: the
// loop of every blocking call.
template <class Operation>
Status poll_to_end(Operation& op, std::string* error) {
    IdleBackoff idle;
    Status s;
    while (!op.finished()) {
        bool moved = false;
        if (!ok(s = op.poll(&moved, error))) return s;
        if (idle.after_round(moved) && !ok(s = op.check_stall(idle.idle_since(), error))) return s;
    }
    return Status::ok;
}

// Whether the arguments make a ring (the checks ring_allreduce makes).
bool ring_arguments_valid(const RingPeers& peers, const RingOptions& options);

// Allreduces `count` elements of `type` over the ring: sends go to
// `to_next`, receives come from `from_prev`, which do the reductions.
// sendbuf may equal recvbuf (MPI_IN_PLACE); otherwise they must not overlap.
// On failure *error explains it and both channels have been aborted.
// `phases` runs one half only (algo/ring_schedule.h): the reduce-scatter
// reads sendbuf and leaves chunk position+1 reduced in recvbuf (what the
// other chunks of recvbuf hold is unspecified); the allgather starts from
// that chunk: in recvbuf when sendbuf equals recvbuf, else in sendbuf (the
// chunk's first element at sendbuf[0]), and then the ring sends each of its
// segments from there and has the send channel copy it into place too
// (Departure::copy_to; streamed like the results,
// RingOptions::stream_results).  That copy is a host copy: out of place,
// the allgather takes host memory only.
Status ring_allreduce(const RingPeers& peers, uint32_t sequence, const void* sendbuf, void* recvbuf, size_t count,
                      DataType type, const RingOptions& options, SendChannel& to_next, RecvChannel& from_prev,
                      std::string* error, RingPhases phases = RingPhases::allreduce);
// Either half or both over any layout of the chunks: with
// ring_block_layout's, a reduce-scatter leaves each rank's MPI block reduced
// in its place in recvbuf, and an allgather that starts from each rank's
// block in place fills every block.
// `own_chunk_out`: see RingOperation::land_own_chunk_in (null: recvbuf).
Status ring_run(const RingPeers& peers, uint32_t sequence, const void* sendbuf, void* recvbuf,
                const ChunkLayout& layout, DataType type, const RingOptions& options, SendChannel& to_next,
                RecvChannel& from_prev, RingPhases phases, std::string* error, char* own_chunk_out = nullptr);

}  // namespace nexar
