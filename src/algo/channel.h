// The two ends of a ring hop, as the ring driver (algo/ring.h) sees them.
//
// A rank sends one stream of segment messages to its successor and receives
// one from its predecessor.  Each hop is a channel of some kind:
//   transport/shm_channel.h   ranks of one node: slots of a shared-memory
//                             inbox, memcpy in, reduce straight out;
//   transport/ucx_channel.h   any two ranks: UCX tag messages, with a
//                             SegmentEngine for host or GPU buffers;
//   transport/mpi_channel.h   any two ranks: the MPI's own point-to-point,
//                             with a SegmentEngine likewise.
// The two hops of one rank may be of different kinds (the last rank of a
// node receives through shared memory and sends over the network).  The
// driver holds the schedule, the stall checks, polling and yielding, and the
// error text once; a channel only moves messages and says what it saw.
//
// Messages of a stream are handled strictly in order.  Neither interface
// blocks: "no room" and "nothing arrived yet" are answers, not waits.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "base/status.h"

namespace nexar {

// Which kind a channel is (error text, and which byte counter it feeds).
enum class ChannelKind { shm, ucx, mpi };
inline const char* channel_kind_name(ChannelKind k) {
    return k == ChannelKind::shm ? "shared memory" : k == ChannelKind::ucx ? "UCX" : "the MPI's point-to-point";
}

// The slots of its scratch (receive slots, request records) that a
// channel's messages in flight take: base .. base+depth-1 (message i takes
// base + i % depth).  A depth alone is slots 0 .. depth-1, as a ring's
// channels take them; channels that run at once on one scratch take
// disjoint banks (the halving-doubling's overlapping exchanges,
// algo/halving_doubling.h).
struct SlotBank {
    SlotBank(uint32_t depth_, uint32_t base_ = 0) : depth(depth_ ? depth_ : 1), base(base_) {}  // NOLINT: a depth is a bank
    uint32_t slot(size_t message) const { return base + uint32_t(message % depth); }
    uint32_t depth;
    uint32_t base;
};

// The next message a rank sends: `bytes` at `src`, tagged `tag`
// (algo/tag.h), bytes [offset, offset + bytes) of the operation's
// result (src may lie outside recvbuf: an allgather's own block is sent
// from the caller's sendbuf).  `copy_to`: where this rank keeps a copy of
// the same bytes (that own block, into place), host memory only; the
// channel writes it, with streaming stores when `stream`
// (memory/host_copy.h), together with a copy of its own where it makes one.
struct Departure {
    const char* src = nullptr;
    size_t bytes = 0;
    size_t offset = 0;
    uint64_t tag = 0;
    char* copy_to = nullptr;
    bool stream = false;
};

class SendChannel {
public:
    virtual ~SendChannel() = default;
    virtual ChannelKind kind() const = 0;
    // Ring operation `sequence` (its tags' call sequence) begins.  Its
    // results land at the same offsets of every rank's recvbuf: a channel
    // that writes straight into its peer's buffer puts a message at the
    // offset its Departure names.  Called before the operation's first
    // start().
    virtual void begin_operation(uint32_t /*sequence*/) {}
    // Starts sending the next message; when it says *started, the copy to
    // d.copy_to is made.  *started is false when the channel has no room
    // now; the driver tries again after progress().  The bytes at d.src
    // must stay put until the message completes.
    virtual Status start(const Departure& d, bool* started, std::string* error) = 0;
    // Moves started messages along; sets *moved when one got further.
    virtual Status progress(bool* moved, std::string* error) = 0;
    // Every started message has completed.
    virtual bool drained() const = 0;
    // Called while nothing moves: an error when the peer is known dead.
    virtual Status check_peer(std::string* error) = 0;
    // After a failure anywhere: stops, and leaves no operation that could
    // still touch the caller's memory.
    virtual void abort() = 0;
    // Waits for any asynchronous work of the call (GPU copies) to end.
    virtual Status finish(std::string*) { return Status::ok; }
    // Payload bytes this channel has sent.
    uint64_t bytes_sent() const { return bytes_sent_; }

protected:
    uint64_t bytes_sent_ = 0;
};

// What the next expected message is for: `count` elements, reduced into
// `place` together with `input` (place = input op message; input may equal
// place), or copied into `place`.  `stream`: copy with streaming stores,
// past the cache (the ring will not read `place` again, and the call is too
// large for its results to stay in cache: memory/host_copy.h).
struct Arrival {
    char* place = nullptr;
    const char* input = nullptr;
    size_t count = 0;
    size_t bytes = 0;
    uint64_t tag = 0;
    bool reduce = false;
    bool stream = false;
};

class RecvChannel {
public:
    virtual ~RecvChannel() = default;
    virtual ChannelKind kind() const = 0;
    // Ring operation `sequence` begins and places its messages in [recvbuf,
    // recvbuf + bytes).  Called before the operation's first post().
    virtual void begin_operation(uint32_t /*sequence*/, char* /*recvbuf*/, size_t /*bytes*/) {}
    // Announces the next message; *posted is false when no more may be
    // announced now.
    virtual Status post(const Arrival& a, bool* posted, std::string* error) = 0;
    // Handles what arrived (a wrong tag or length is Status::mismatch); sets
    // *moved when a message got further.
    virtual Status progress(bool* moved, std::string* error) = 0;
    // Messages whose bytes are final in `place` (the driver may forward them).
    virtual size_t done() const = 0;
    // Announced and not yet done.
    virtual bool drained() const = 0;
    virtual Status check_peer(std::string* error) = 0;
    virtual void abort() = 0;
    virtual Status finish(std::string*) { return Status::ok; }
};

}  // namespace nexar
