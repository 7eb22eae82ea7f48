// The one-shot allreduce, for small vectors on a communicator whose ranks
// all share a node.  Each rank copies its whole input onto its board (a
// shared-memory slot that every other rank of the node maps) and publishes
// the call's sequence number; then each reduces every rank's board, in rank
// order, into its own recvbuf.  One copy and one meeting of the ranks,
// where the ring takes 2 (P - 1) steps of a chunk each: for small vectors
// those steps' meetings cost more than the bytes do (docs/how-it-works.md, "Small
// calls").  Every rank reduces the same inputs in the same order, so all get
// the same bits, as from the ring.
//
// A board has two slots, used by calls alternately: a rank writes slot
// s % 2 again only at call s + 2, by when every peer has published s + 1,
// and so has finished reading call s.  Every rank of the communicator must
// take every one-shot call, in the same order (the caller's agreement).
//
// Polled, like RingOperation: the first poll copies the input in and
// publishes it; later polls reduce once every board holds the call.
// Liveness (a peer that exited, a timeout) is the caller's (it knows the
// processes): waiting_for() names the rank not yet there.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "reduce/types.h"

namespace nexar {

// One rank's board as the one-shot sees it.
struct OneShotBoard {
    std::atomic<uint64_t>* published = nullptr;  // the latest call whose input is on it
    char* slots[2] = {nullptr, nullptr};          // call s's input in slots[s % 2]
    size_t slot_bytes = 0;
};

class OneShotAllreduce {
public:
    // `boards` by rank (this rank's at `me`), valid while this lives;
    // `sequence` > 0, one more than this communicator's previous one-shot
    // call.  sendbuf may equal recvbuf.  Check valid() first: the vector
    // must fit a slot and the op the type.
    OneShotAllreduce(const std::vector<OneShotBoard>& boards, int me, uint64_t sequence, const void* sendbuf,
                     void* recvbuf, size_t count, DataType type, ReduceOp op);
    bool valid() const { return valid_; }
    Status poll(bool* moved, std::string* error);
    bool finished() const { return finished_; }
    // The first rank whose board does not hold this call yet (-1: none).
    int waiting_for() const;
    // Whether any other rank has published this call (it started it).
    bool any_peer_arrived() const;

private:
    const std::vector<OneShotBoard>& boards_;
    const int me_;
    const uint64_t seq_;
    const char* send_;
    char* recv_;
    const size_t count_, bytes_;
    const DataType type_;
    const ReduceOp op_;
    bool valid_ = false, published_ = false, finished_ = false;
};

}  // namespace nexar
