// Ring hops over a transport of tagged messages (algo/channel.h): UCX tag
// messages (transport/ucx_channel.h) or the MPI's own point-to-point
// (transport/mpi_channel.h), host or GPU buffers alike.
//
// Moving and reducing the bytes of a segment is the job of a SegmentEngine
// (transport/segment_engine.h): host buffers, or GPU buffers staged through
// pinned host memory or handed to a transport that moves device memory.
// Each direction has three stages per message: sends are staged (e.g.
// copied off the GPU), posted to the transport, completed; receives are
// posted, arrive (the engine starts the reduction), and finish (the
// reduction is done, which lets the driver forward the segment).  Up to
// `depth` messages are in flight each way, in slots message % depth.
//
// What differs between transports, a MessagePort says: how a message is
// posted, whether it completed, how a peer's failure shows, and how the
// messages in flight are stopped after a failure.  The stages, the
// engine's part and the error text around them live here, once.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>

#include "algo/channel.h"
#include "algo/ring.h"
#include "base/status.h"
#include "transport/segment_engine.h"

namespace nexar {

// One direction of one hop on a transport of tagged messages.  Slots
// (SlotBank) name the messages in flight; a slot is posted again only
// after its message completed.
class MessagePort {
public:
    virtual ~MessagePort() = default;
    virtual ChannelKind kind() const = 0;
    // Posts message `slot`: `bytes` from (send) or into (receive) `wire`,
    // tagged `tag` (algo/tag.h).  On Status::ok the message is posted (and
    // may have completed already); *error says why not.
    virtual Status post_send(uint32_t slot, const WireBuffer& wire, size_t bytes, uint64_t tag, std::string* error) = 0;
    virtual Status post_recv(uint32_t slot, const WireBuffer& wire, size_t bytes, uint64_t tag, std::string* error) = 0;
    // Moves the transport along, where this port drives it (UCX: its
    // worker, once per rank); asking whether a message completed moves
    // the MPI's.
    virtual void progress() {}
    // Whether send `slot` completed (*done); an error when it failed.
    virtual Status send_done(uint32_t slot, bool* done, std::string* error) = 0;
    // Whether receive `slot` completed with exactly `expected` bytes
    // (*done); Status::mismatch when another length came, another error
    // when it failed.
    virtual Status recv_done(uint32_t slot, size_t expected, bool* done, std::string* error) = 0;
    // Called while nothing moves: an error when the peer is known dead.
    virtual Status check_peer(std::string* error) = 0;
    // After a failure: stops messages [first, last) of this direction
    // (slots bank.slot(i)) and leaves none that could still touch memory
    // the caller will reuse or free.
    virtual void abort(size_t first, size_t last, SlotBank bank) = 0;
};

// What a send or a receive posted to the transport is, kept until it completes.
struct PendingMessage {
    Arrival arrival;  // receives
    size_t bytes = 0;
    uint64_t tag = 0;
    WireBuffer wire;  // sends: what the transport sends once the engine has staged it
};

// What both directions of a hop hold: the port, the engine, and the
// messages in flight by slot.
class MessageStream {
protected:
    MessageStream(MessagePort& port, SegmentEngine& engine, SlotBank bank)
        : port_(port), engine_(engine), bank_(bank), depth_(bank.depth) {}
    uint32_t slot(size_t message) const { return bank_.slot(message); }
    // The engine's asynchronous work has ended (the channels' finish()).
    Status drain_engine(std::string* error);

    MessagePort& port_;
    SegmentEngine& engine_;
    SlotBank bank_;
    uint32_t depth_;                          // messages in flight at most (bank_.depth)
    PendingMessage pending_[kMaxRingDepth];  // by slot
};

class MessageSendChannel : public SendChannel, private MessageStream {
public:
    MessageSendChannel(MessagePort& port, SegmentEngine& engine, SlotBank bank) : MessageStream(port, engine, bank) {}
    ChannelKind kind() const override { return port_.kind(); }
    Status start(const Departure& d, bool* started, std::string* error) override;
    Status progress(bool* moved, std::string* error) override;
    bool drained() const override { return done_ == staged_; }
    Status check_peer(std::string* error) override { return port_.check_peer(error); }
    void abort() override;
    Status finish(std::string* error) override { return drain_engine(error); }

private:
    // staged >= posted >= done
    size_t staged_ = 0, posted_ = 0, done_ = 0;
};

class MessageRecvChannel : public RecvChannel, private MessageStream {
public:
    MessageRecvChannel(MessagePort& port, SegmentEngine& engine, SlotBank bank) : MessageStream(port, engine, bank) {}
    ChannelKind kind() const override { return port_.kind(); }
    Status post(const Arrival& a, bool* posted, std::string* error) override;
    Status progress(bool* moved, std::string* error) override;
    size_t done() const override { return done_; }
    bool drained() const override { return done_ == posted_; }
    Status check_peer(std::string* error) override { return port_.check_peer(error); }
    void abort() override;
    Status finish(std::string* error) override { return drain_engine(error); }

private:
    // posted >= arrived >= done
    size_t posted_ = 0, arrived_ = 0, done_ = 0;
};

// How long a failed ring's channel waits for its transport to hand back
// the messages in flight before it abandons their memory
// (RingScratch::abandon_*): one budget for each channel's whole abort, so
// that a failed ring reports its error at most twice this after it gave up
// (the user guide's bound on NEXAR_TIMEOUT_S).
constexpr double kAbortWaitSeconds = 0.25;
// Now plus kAbortWaitSeconds.
std::chrono::steady_clock::time_point abort_deadline();

// printf into a std::string (the ports' error text).
std::string message_error(const char* fmt, ...) __attribute__((format(printf, 1, 2)));

}  // namespace nexar
