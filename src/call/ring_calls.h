// The rings a communicator context can run, each wired from the context's
// channels: the flat ring over the whole communicator (shared memory on the
// hops inside a node, UCX on the others), the hierarchical allreduce
// (algo/hierarchical.h) and, for small vectors on one node, the one-shot
// allreduce on the context's boards (algo/one_shot.h), all as runs that a call's task polls
// (call/collective_task.h).  The runs add the bytes of successful calls to
// the stats per channel kind.  The task decides which one runs.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include <utility>

#include "algo/halving_doubling.h"
#include "algo/hierarchical.h"

#include "algo/ipc_allreduce.h"
#include "algo/one_shot.h"
#include "algo/ring.h"
#include "runtime/comm_context.h"
#include "runtime/config.h"
#include "transport/segment_engine.h"
#include "transport/shm_channel.h"
#include "transport/ucx_channel.h"

namespace nexar {

// A ring call in flight on a context's channels: built when the call
// runs (it takes its sequence numbers then), polled until finished()
// (poll_to_end, algo/ring.h, for a blocking call), then account()ed if it
// succeeded.  The channels are its own; the buffers, the
// engine and the context are the caller's and must outlive it.
class RingCallRun {
public:
    virtual ~RingCallRun() = default;
    // Moves along whatever can move; sets *moved when something did.  On
    // failure *error explains it and every channel has been aborted.
    virtual Status poll(bool* moved, std::string* error) = 0;
    virtual bool finished() const = 0;
    // While nothing moves: an error when a peer is dead or nothing moved
    // for longer than the timeout (RingOperation::check_stall).
    virtual Status check_stall(std::chrono::steady_clock::time_point idle_since, std::string* error) = 0;
    // After success: the bytes each channel kind carried, to the stats.
    virtual void account() const = 0;
};

// A RingCallRun around an operation that its constructor builds (none:
// arguments no ring takes).  The derived class's channels outlive it.
template <class Operation>
class OperationRun : public RingCallRun {
public:
    bool valid() const { return op_.has_value(); }
    Status poll(bool* moved, std::string* error) override { return op_->poll(moved, error); }
    bool finished() const override { return op_->finished(); }
    Status check_stall(std::chrono::steady_clock::time_point idle_since, std::string* error) override {
        return op_->check_stall(idle_since, error);
    }

protected:
    std::optional<Operation> op_;  // reset first by the derived destructor: it uses the channels
};

// The flat ring, running `phases` over `layout`.  use_shm: the hops that
// have shared-memory inboxes take them (agreed by every rank), moving
// segments as `copy` says; otherwise every hop takes network `net` (UCX or
// the MPI's point-to-point: the call's, CommContext::network_for).  `engine` moves the bytes of
// the network's hops (host or device buffers).  `own_chunk_out`: where the
// reduce-scatter leaves this rank's chunk (RingOperation::land_own_chunk_in).
class FlatRingRun final : public OperationRun<RingOperation> {
public:
    // Check `valid` before the first poll.
    FlatRingRun(CommContext& ctx, CommContext::Net net, bool use_shm, ShmCopy copy, SegmentEngine& engine,
                const void* src, void* recvbuf,
                const ChunkLayout& layout, RingPhases phases, DataType type, ReduceOp op, const RingOptions& opt,
                char* own_chunk_out = nullptr);
    ~FlatRingRun() override { op_.reset(); }
    void account() const override;

private:
    std::optional<ShmSendChannel> shm_send_;
    std::optional<ShmRecvChannel> shm_recv_;
    NetHop net_;  // the hops off shared memory
    SendChannel* out_ = nullptr;
};

// A hierarchical run's half: the reduce-scatter or the allgather over the
// MPI's blocks by rank, staged in `staging` (algo/hierarchical.h's
// LaneOrderedBlocks).
struct StagedHalf {
    Collective part = Collective::allreduce;  // allreduce: no half
    const size_t* counts = nullptr;           // by rank, elements
    const size_t* displs = nullptr;
    char* staging = nullptr;                  // the whole vector's bytes
};

// The hierarchical allreduce (algo/hierarchical.h) on host buffers, its
// phase across nodes on network `net`: the rings of each lane, or
// (`halving_doubling`) their halving-doublings (PartnerHops).  Requires
// ctx.hier_ready(), and ctx.halving_doubling_ready() for the latter.
// Or its half (`half`, StagedHalf; requires ctx.hier_halves_ready()): `src`
// the reduce-scatter's whole input, the allgather's own block (or, in
// place, recvbuf).
class HierarchicalRun final : public OperationRun<HierarchicalOperation> {
public:
    // Check `valid` before the first poll.
    HierarchicalRun(CommContext& ctx, CommContext::Net net, const void* src, void* recvbuf, size_t count,
                    DataType type, ReduceOp op, const RingOptions& local_opt, const RingOptions& inter_opt,
                    bool halving_doubling, const StagedHalf& half = StagedHalf());
    ~HierarchicalRun() override { op_.reset(); }
    void account() const override;

private:
    std::optional<LaneOrderedBlocks> blocks_;  // a half's
    HierarchicalHalf half_;
    std::optional<ShmSendChannel> local_out_;  // none on a node of one rank
    std::optional<ShmRecvChannel> local_in_;
    HostEngine engine_;  // the phase across nodes' (in place; out of place on a node of one rank)
    NetHop inter_;       // the rings'
    std::optional<PartnerHops> partners_;  // the halving-doublings'
    bool halving_doubling_;  // the phase across nodes (also where this rank carries no lane)
};

// The halving-doubling (algo/halving_doubling.h) across nodes of one rank
// each, its exchanges on network `net` (PartnerHops), its segments moved by
// `engine` (host or device buffers, as the flat ring's): the allreduce, or
// the reduce-scatter or allgather over `blocks` (by node, which is by rank
// there; the allgather in place).  Requires ctx.halving_doubling_ready().
class HalvingDoublingRun final : public OperationRun<HalvingDoublingOperation> {
public:
    // Check `valid` before the first poll.
    HalvingDoublingRun(CommContext& ctx, CommContext::Net net, SegmentEngine& engine, const void* src,
                       void* recvbuf, size_t count, DataType type, const RingOptions& opt,
                       Collective part = Collective::allreduce,
                       const PositionBlocks* blocks = nullptr);
    ~HalvingDoublingRun() override { op_.reset(); }
    void account() const override;

private:
    const HalvingDoublingSchedule schedule_;
    PartnerHops hops_;
};

// The ranks whose boards a BoardRun watches: the whole communicator, or
// the ranks of this node (members[i] is board i's rank in the communicator).
struct BoardGroup {
    int size = 0, me = 0;
    const std::vector<int>* members = nullptr;  // null: board i is rank i's
    int rank_of(int i) const { return members ? (*members)[size_t(i)] : i; }
};

// A run that meets its peers on shared-memory boards rather than
// channels (the one-shot's, the IPC allreduce's): the same checks of the
// peers for both.  A peer whose board says its communicator failed may be
// out of step with this rank's; one that exited or gave up, or no move for
// NEXAR_TIMEOUT_S, fails the call; failing marks this rank's board, so the
// others stop waiting for it.

template <class Operation>
class BoardRun : public RingCallRun {
public:
    Status poll(bool* moved, std::string* error) override;
    bool finished() const override { return op_.finished(); }
    Status check_stall(std::chrono::steady_clock::time_point idle_since, std::string* error) override;

protected:
    template <class... OperationArgs>
    BoardRun(CommContext& ctx, const RingOptions& opt, const char* what, OperationArgs&&... args)
        : ctx_(ctx), op_(std::forward<OperationArgs>(args)...), opt_(opt), what_(what) {}
    virtual ShmInbox& board(int index) = 0;
    virtual BoardGroup group() const { return BoardGroup{ctx_.size(), ctx_.rank(), nullptr}; }
    // Waits with no timeout (a persistent call no peer has started yet).
    virtual bool patient() const { return false; }
    // Can stall with every peer there (waiting for its own work: the GPU's).
    virtual bool waits_for_own_work() const { return false; }
    // A peer whose board says its communicator failed fails the call (it
    // may be out of step); false: the call reads what that peer published
    // (a meeting, whose notes say so).
    virtual bool fails_on_broken_peer() const { return true; }
    Status fail(Status s);
    Status check_peers(std::string* error);

    CommContext& ctx_;
    Operation op_;
    RingOptions opt_;
    const char* what_;
    bool checked_peers_ = false;
};

// A blocking call's agreement on the context's boards (algo/one_shot.h,
// BoardMeeting): `note` (the agreement vector, `fields` int64) reduced
// with MIN in place, and `input` (null: none) put on this rank's board
// for a one-shot of the same sequence (sequence()).  Requires
// ctx.boards_ready(); takes the context's next one-shot sequence.  Every
// rank publishes before it checks anything, so that the ranks stay in
// step whatever the meeting decides; a peer whose communicator failed
// before takes part (its note says it cannot run); a peer that exited,
// or no move for NEXAR_TIMEOUT_S, fails it.
class AgreementRun final : public BoardRun<BoardMeeting> {
public:
    AgreementRun(CommContext& ctx, const RingOptions& opt, int64_t* note, int fields, const void* input,
                 size_t input_bytes);
    bool valid() const { return op_.valid(); }
    uint64_t sequence() const { return sequence_; }
    // Finished: some rank took the sequence as a known one-shot; meet again.
    bool voided() const { return op_.voided(); }
    void account() const override;

private:
    ShmInbox& board(int rank) override { return ctx_.board(rank); }
    bool fails_on_broken_peer() const override { return false; }
    uint64_t sequence_;
};

// A known one-shot on the context's boards (algo/one_shot.h,
// KnownOneShot; call/known_one_shot.h): the one-shot without a meeting
// where every rank took it so, else nothing done on any rank.  Requires
// ctx.boards_ready(); takes the context's next one-shot sequence.  A peer
// whose communicator failed takes its call through its task: the keys
// differ, and every rank goes there.
class KnownOneShotRun final : public BoardRun<KnownOneShot> {
public:
    KnownOneShotRun(CommContext& ctx, const RingOptions& opt, uint64_t key, const void* sendbuf, void* recvbuf,
                    size_t count, DataType type, ReduceOp op);
    bool valid() const { return op_.valid(); }
    bool taken() const { return op_.taken(); }
    // Its stats as a one-shot's that met once (AgreementRun, OneShotRun),
    // its ring_calls and ring_bytes too (count_one_shot).
    void account() const override;

private:
    ShmInbox& board(int rank) override { return ctx_.board(rank); }
    bool fails_on_broken_peer() const override { return false; }
    size_t bytes_;
};

// The one-shot allreduce (algo/one_shot.h) on the context's boards, or
// its reduce-scatter or allgather (`blocks`, valid while it runs).
// Requires ctx.boards_ready(); takes the context's next one-shot sequence,
// or `met`'s, where that AgreementRun put every rank's input on the boards.
class OneShotRun final : public BoardRun<OneShotAllreduce> {
public:
    // Check `valid` before the first poll.
    OneShotRun(CommContext& ctx, const void* src, void* recvbuf, size_t count, DataType type, ReduceOp op,
               const RingOptions& opt, const AgreementRun* met = nullptr, const OneShotBlocks* blocks = nullptr);
    bool valid() const { return op_.valid(); }
    void account() const override;
    // A persistent call's next start (built without a meeting): the same
    // run, on the context's next one-shot sequence, its peers checked again.
    void restart() {
        op_.restart(ctx_.next_one_shot());
        checked_peers_ = false;
    }

private:
    ShmInbox& board(int rank) override { return ctx_.board(rank); }
    bool patient() const override { return opt_.patient_start && !op_.any_peer_arrived(); }
    size_t bytes_;
};

// The IPC allreduce (algo/ipc_allreduce.h) of device buffers on the
// context's IPC state; its stall checks also cover the wait for the GPU's
// work, which a peer that died may never let finish.  Requires ctx.ipc();
// takes its next sequence.
// `part`: the whole allreduce (the communicator on one node), a node
// phase of IpcHierarchicalRun among the node's ranks, or a reduce-scatter
// or allgather on one node over the MPI's blocks (`layout`).
class IpcRun final : public BoardRun<IpcAllreduce> {
public:
    IpcRun(CommContext& ctx, const void* src, void* recvbuf, const nexar_ipc_memory& src_ipc,
           const nexar_ipc_memory& recv_ipc, size_t count, DataType type, ReduceOp op, const RingOptions& opt,
           IpcPart part = IpcPart::allreduce, const IpcLayout& layout = IpcLayout());
    void account() const override;

private:
    ShmInbox& board(int index) override { return ctx_.ipc()->board(index); }
    BoardGroup group() const override;
    bool waits_for_own_work() const override { return true; }
};

// The hierarchical allreduce of device buffers on nodes of several ranks
// (issue 27): GPU to GPU through IPC inside the node, the device rings
// or halving-doublings (`engine`: staged through host memory where UCX
// takes no device memory) across nodes, one phase after the other:
//   1. the IPC reduce-scatter among the node's L ranks leaves chunk q (of
//      L) reduced over the node in local index q's receive buffer;
//   2. the ring of local index q across the P nodes allreduces that chunk
//      in place (L such rings at once, as in algo/hierarchical.h), or
//      (`halving_doubling`) its halving-doubling (PartnerHops; requires
//      ctx.halving_doubling_ready()): algo/hierarchical.h's AcrossNodes;
//   3. the IPC allgather gives every rank of the node every chunk.
// No pipeline: inside a node the GPUs move bytes far faster than any
// link between nodes, so overlapping the phases would hide little (the
// host buffers' HierarchicalOperation pipelines because shared memory is
// not much faster than the link).  Phase 2 starts once phase 1's work has
// ended (its stream's event) and phase 3 once phase 2's device work has:
// the device engine's streams and the IPC stream never touch a chunk at
// once.  Requires ctx.ipc() among the node's ranks and ctx.hier_ready().
class IpcHierarchicalRun final : public RingCallRun {
public:
    IpcHierarchicalRun(CommContext& ctx, CommContext::Net net, SegmentEngine& engine, const void* src, void* recvbuf,
                       const nexar_ipc_memory& src_ipc, const nexar_ipc_memory& recv_ipc, size_t count, DataType type,
                       ReduceOp op, const RingOptions& opt, bool halving_doubling);
    ~IpcHierarchicalRun() override { inter_.reset(); }
    // The phase across nodes takes these options (the same on every rank).
    bool valid() const { return valid_; }
    Status poll(bool* moved, std::string* error) override;
    bool finished() const override { return phase_ == 3; }
    Status check_stall(std::chrono::steady_clock::time_point idle_since, std::string* error) override;
    void account() const override;

private:
    Status fail_node(Status s);

    CommContext& ctx_;
    void* recv_;
    nexar_ipc_memory recv_ipc_;
    size_t count_;
    DataType type_;
    ReduceOp op_;
    RingOptions opt_;
    uint32_t inter_sequence_;
    std::optional<IpcRun> node_;  // phase 1, then phase 3
    NetHop net_;  // the ring across nodes' channels
    std::optional<PartnerHops> partners_;  // or the halving-doubling's
    HierarchicalLinks links_;  // only its inter fields: inter, and inter_out/inter_in or inter_exchanges
    AcrossNodes inter_;
    int phase_ = 0;  // 0, 1, 2: the phase running (from 1 above); 3: finished
    bool valid_ = false;
};

// Scratch slot bytes the inter-node rings of run_hierarchical need.
size_t hierarchical_slot_bytes(const CommContext& ctx, size_t count, size_t elem_size, size_t segment_bytes);

}  // namespace nexar
