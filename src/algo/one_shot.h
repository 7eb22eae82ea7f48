// The one-shot allreduce, for small vectors on a communicator whose ranks
// all share a node.  Each rank copies its whole input onto its board (a
// shared-memory slot that every other rank of the node maps) and publishes
// the call's sequence number; then each reduces every rank's board, in rank
// order, into its own recvbuf.  One copy and one meeting of the ranks,
// where the ring takes 2 (P - 1) steps of a chunk each: for small vectors
// those steps' meetings cost more than the bytes do (docs/how-it-works.md, "Small
// calls").  Every rank reduces the same inputs in the same order, so all get
// the same bits, as from the ring.  Small reduce-scatters and allgathers
// take its halves on the same boards (OneShotBlocks, below).
//
// A board has two slots, used by calls alternately: a rank writes slot
// s % 2 again only at call s + 2, by when every peer has published s + 1,
// and so has finished reading call s (every caller publishes a call only
// once its previous call on the boards has finished: the nonblocking
// engine's start order, call/nonblocking_engine.h).  Every rank of the
// communicator must take every one-shot call, in the same order (the
// caller's agreement).
//
// Polled, like RingOperation: the first poll copies the input in and
// publishes it; later polls reduce once every board holds the call.
//
// Each slot starts with a head (BoardHead: the call's sequence, published
// last, a key saying what the slot holds, and an input of up to
// kBoardHeadInputBytes), then a larger input, then a note.  The boards
// also carry the ranks' agreement (BoardMeeting): the note says what the
// rank says about the call (the caller's vector, reduced with MIN), so
// that a call meets the other ranks once: its input goes onto the board
// with its note, and where every note says the one-shot, the one-shot
// reduces it with no second meeting.  A known one-shot (KnownOneShot)
// needs no note: its key says it all.
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

// The cache line at the head of each board slot: the call's sequence,
// stored last, with what the rank says about the call and, for the
// smallest calls, their input, so that a peer learns all of it from one
// line.  A slot's head holds call s, s + 2, ... (s % 2 == its slot).
struct alignas(64) BoardHead {
    std::atomic<uint64_t> sequence{0};  // the latest call published in this slot (release)
    uint64_t key = 0;                   // what the slot holds (kBoardHolds*, or a known one-shot's key)
    char input[48];                     // a known one-shot's input, where it fits (kBoardHeadInputBytes)
};
static_assert(sizeof(BoardHead) == 64, "one cache line");
constexpr size_t kBoardHeadInputBytes = sizeof(BoardHead::input);
// A one-shot's input (its ranks agreed beforehand), or a meeting's note.
// A known one-shot's key (KnownOneShot) has its top bit set.
constexpr uint64_t kBoardHoldsInput = 1, kBoardHoldsNote = 2;
constexpr uint64_t kKnownOneShotKeyBit = uint64_t(1) << 63;

// Bytes of a board slot's note (at least the caller's agreement vector),
// after its head and its input.
constexpr size_t kBoardNoteBytes = 128;

// One rank's board as the one-shot sees it: per slot, its head, its input
// and its note.
struct OneShotBoard {
    BoardHead* heads[2] = {nullptr, nullptr};  // call s's head in heads[s % 2]
    int64_t* notes[2] = {nullptr, nullptr};    // call s's note in notes[s % 2] (kBoardNoteBytes)
    char* slots[2] = {nullptr, nullptr};       // call s's input in slots[s % 2]
    size_t slot_bytes = 0;                     // of input
    // Whether this board holds call `sequence` (or a later one).
    bool holds(uint64_t sequence) const {
        return heads[sequence % 2]->sequence.load(std::memory_order_acquire) >= sequence;
    }
};

// A call on the boards: the boards by rank (this rank's at `me`), valid
// while it lives, the call's sequence (> 0, one more than the
// communicator's previous call on them), and where it stands.
class BoardCall {
public:
    bool valid() const { return valid_; }
    bool finished() const { return finished_; }
    // The first rank whose board does not hold this call yet (-1: none).
    int waiting_for() const;
    // Whether any other rank has published this call (it started it).
    bool any_peer_arrived() const;

protected:
    // `input_bytes`: what this call puts in a slot (it must fit).
    BoardCall(const std::vector<OneShotBoard>& boards, int me, uint64_t sequence, size_t input_bytes);
    size_t slot() const { return size_t(seq_ % 2); }
    // Where a rank's input of `bytes` lies in this call's slot: the
    // smallest in its head, where a peer reads it with the sequence.
    char* input_of(const OneShotBoard& b, size_t bytes) const {
        return bytes <= kBoardHeadInputBytes ? b.heads[slot()]->input : b.slots[slot()];
    }
    const OneShotBoard& own() const { return boards_[size_t(me_)]; }
    BoardHead& own_head() const { return *own().heads[slot()]; }
    // The same call again as call `sequence` (a persistent call's next
    // start): nothing published, nothing finished.
    void restart(uint64_t sequence) {
        seq_ = sequence;
        published_ = finished_ = false;
    }
    // Publishes this rank's slot, which holds `key`'s kind of content.
    void publish(uint64_t key) {
        own_head().key = key;
        own_head().sequence.store(seq_, std::memory_order_release);
        published_ = true;
    }

    const std::vector<OneShotBoard>& boards_;
    const int me_;
    uint64_t seq_;
    bool valid_ = false, published_ = false, finished_ = false;
};

// One meeting of the ranks on their boards: each publishes its note
// (`fields` int64, at most kBoardNoteBytes) and, where `input_bytes` > 0,
// its input in the same slot; once every board holds the call, `note`
// holds the least of each field over the ranks, on every rank the same.
// A one-shot of the same sequence may then reduce the inputs
// (OneShotAllreduce's input_on_board).  Every rank of the communicator
// must take every meeting, in the same order, with the same `sequence`
// counter as the one-shots.
//
// A peer that took this sequence as a known one-shot (KnownOneShot) left
// no note: the meeting is void on every rank (voided()), and every rank
// meets again on the next sequence.
class BoardMeeting final : public BoardCall {
public:
    BoardMeeting(const std::vector<OneShotBoard>& boards, int me, uint64_t sequence, int64_t* note, int fields,
                 const void* input, size_t input_bytes);
    Status poll(bool* moved, std::string* error);
    bool voided() const { return voided_; }

private:
    bool voided_ = false;
    int64_t* note_;
    const int fields_;
    const void* input_;
    const size_t input_bytes_;
};

// A known one-shot: a call every rank is expected to take as the one-shot without a
// meeting: a blocking allreduce of a vector and type, on host memory, that
// the same communicator took as the one-shot before (call/known_one_shot.h
// says when).  Each rank publishes its input (in the head where it fits)
// and the call's key (its count, type, op and in-place flag, alike on every
// rank that calls the same) in one go.  Where every board holds the same
// key, every rank reduces the inputs as the one-shot does; where any
// differs (a rank took the call through its task and meeting, or a rank
// passed another count), no rank reduces anything (taken() is false
// everywhere) and every rank goes through its task, whose meeting then
// takes the next sequence.
class KnownOneShot final : public BoardCall {
public:
    KnownOneShot(const std::vector<OneShotBoard>& boards, int me, uint64_t sequence, uint64_t key,
                 const void* sendbuf, void* recvbuf, size_t count, DataType type, ReduceOp op);
    Status poll(bool* moved, std::string* error);
    // Finished: whether every rank took it (recvbuf holds the result).
    bool taken() const { return taken_; }

private:
    const uint64_t key_;
    const char* send_;
    char* recv_;
    const size_t count_, bytes_;
    const DataType type_;
    const ReduceOp op_;
    bool taken_ = false;
};

// The one-shot's halves, on the same boards: every rank's MPI block, in
// elements, by rank (alike on every rank).
//   reduce_scatter: each rank publishes its whole vector, and reduces every
//                   rank's copy of its own block, in rank order, into its
//                   recvbuf;
//   allgather:      each rank publishes its own block, and copies every
//                   rank's to its place in recvbuf.
enum class OneShotPart { allreduce, reduce_scatter, allgather };
struct OneShotBlocks {
    OneShotPart part = OneShotPart::allreduce;
    const size_t* displs = nullptr;
    const size_t* counts = nullptr;
};

class OneShotAllreduce final : public BoardCall {
public:
    // sendbuf may equal recvbuf.  Check valid() first: the vector must fit
    // a slot and the op the type.  input_on_board: every rank's
    // BoardMeeting of this sequence put its input on its board already.
    // `blocks` (null: the allreduce): `count` is the whole vector; the
    // allgather's sendbuf is this rank's block (which may lie in place in
    // recvbuf).
    OneShotAllreduce(const std::vector<OneShotBoard>& boards, int me, uint64_t sequence, const void* sendbuf,
                     void* recvbuf, size_t count, DataType type, ReduceOp op, bool input_on_board = false,
                     const OneShotBlocks* blocks = nullptr);
    Status poll(bool* moved, std::string* error);
    // A persistent call's next start: the same vectors, call `sequence`
    // (its input was not on the board before: input_on_board false).
    using BoardCall::restart;
    // What a rank publishes for a call of `count` elements (whole vector).
    static size_t input_bytes(const OneShotBlocks* blocks, int me, size_t count, DataType type) {
        const bool own_block = blocks && blocks->part == OneShotPart::allgather;
        return (own_block ? blocks->counts[me] : count) * datatype_size(type);
    }

private:
    Status take_part();
    const char* send_;
    char* recv_;
    const size_t count_, bytes_;  // bytes_: what each rank publishes
    const DataType type_;
    const ReduceOp op_;
    const OneShotBlocks blocks_;
};

}  // namespace nexar
