// Everything nexar keeps per communicator, cached on it with an MPI
// attribute: its topology (algo/topology.h), the endpoints to its ring
// neighbours on the process's UCX worker, the shared-memory inboxes of its
// same-node hops, the tag ids, the call sequence number and reusable scratch.
//
// Every communicator shares the process's one worker (runtime/runtime.h), so
// tags tell communicators apart.  A stream's tag id is its receiver's: each
// rank picks an id for the communicator that no other live communicator of
// its process has (no agreement needed, so two threads creating contexts
// at once cannot collide), and the ranks allgather them.  A receive then
// only ever matches messages meant for this communicator in this process,
// even when rings on different communicators run at once under
// MPI_THREAD_MULTIPLE.  (Ids agreed with a MAX allreduce once collided that
// way and let two rings cross-talk.)
#pragma once

#include <mpi.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "algo/cost_model.h"
#include "algo/halving_doubling.h"
#include "algo/one_shot.h"
#include "algo/ring.h"
#include "algo/topology.h"
#include "decide/copy_choice.h"
#include "decide/cost_probe.h"
#include "decide/path_learner.h"
#include "memory/device_buffers.h"
#include "runtime/ipc_context.h"
#include "transport/shm_channel.h"
#include "transport/shm_inbox.h"
#include "transport/ucx.h"
#include "transport/mpi_channel.h"
#include "transport/ucx_channel.h"

namespace nexar {

// A host buffer that grows to the largest size asked for and is kept:
// huge-page aligned and advised, like the buffers it stands in for.
class WorkBuffer {
public:
    // At least `bytes`; null when memory runs out.
    char* get(size_t bytes);

private:
    struct FreeDeleter {
        void operator()(void* p) const { free(p); }
    };
    std::unique_ptr<char, FreeDeleter> buffer_;
    size_t bytes_ = 0;
};

class CommContext {
public:
    // id: this rank's tag id for the communicator (see above).
    CommContext(MPI_Comm comm, int rank, int size, uint32_t id, RingTopology topology)
        : comm_(comm), rank_(rank), size_(size), id_(id), topo_(std::move(topology)),
          tag_ids_(size_t(size), id) {}

    MPI_Comm comm() const { return comm_; }
    int rank() const { return rank_; }
    int size() const { return size_; }
    uint32_t id() const { return id_; }
    // Every rank's tag id, gathered at setup.
    void set_tag_ids(std::vector<uint32_t> ids) { tag_ids_ = std::move(ids); }
    uint32_t tag_id_of(int rank) const { return tag_ids_[size_t(rank)]; }
    const RingTopology& topology() const { return topo_; }
    int next_rank() const { return topo_.next(rank_); }
    int prev_rank() const { return topo_.prev(rank_); }

    // Disabled: some rank could not connect, so every rank passes this
    // communicator's calls through (decided collectively at creation).
    bool disabled() const { return disabled_; }
    void disable() { disabled_ = true; }
    // Failed: a ring on it failed on this rank; its endpoints are suspect.
    bool failed() const { return failed_.load(std::memory_order_acquire); }
    // (The progress thread too.)  The other ranks' one-shot calls then stop
    // waiting for this one: its board says so (OneShotRun).
    void mark_failed() {
        failed_.store(true, std::memory_order_release);
        if (!boards_.empty()) boards_[size_t(rank_)]->mark_broken();
    }

    // The channel the ring's hops that are not in shared memory take (and
    // the hierarchical allreduce's across nodes), agreed at setup: UCX,
    // where every rank reached its ring neighbours through it; the MPI's
    // point-to-point on a private duplicate of the communicator
    // (transport/mpi_channel.h); or none, where only shared-memory rings,
    // the one-shot and IPC run (runtime/context_setup.cc, connect_network).
    enum class Net { none, ucx, mpi };
    // As NEXAR_NET spells it.
    static const char* network_name(Net n) { return n == Net::ucx ? "ucx" : n == Net::mpi ? "mpi" : "none"; }
    Net network() const { return net_; }
    bool network_ready() const { return net_ != Net::none; }
    void use_ucx_network() { net_ = Net::ucx; }
    // `comm`: the duplicate, whose messages go up to tag `tag_ub`; the context frees it.
    void use_mpi_network(MPI_Comm comm, int tag_ub) { net_ = Net::mpi, net_comm_ = comm, net_tag_ub_ = tag_ub; }
    MPI_Comm net_comm() const { return net_comm_; }
    int net_tag_ub() const { return net_tag_ub_; }
    // Both: where UCX is the network (NEXAR_NET=auto, across nodes), the
    // MPI's point-to-point may carry the hops too, on `comm` as above; the
    // runtime times both (Runtime::measure_networks) and each call takes
    // the one the costs say is faster for its size (network_for).  The
    // nonblocking calls' agreements stay on network().
    void offer_mpi_beside_ucx(MPI_Comm comm, int tag_ub) { net_comm_ = comm, net_tag_ub_ = tag_ub; }
    bool both_networks() const { return net_ == Net::ucx && net_comm_ != MPI_COMM_NULL; }
    // The measured costs of each, fitted to the flat ring's 2(n-1) steps
    // of 2(n-1)/n of the bytes (identical on every rank); before them,
    // every call takes network().
    void set_network_costs(const ChannelCost& ucx, const ChannelCost& mpi) {
        ucx_cost_ = ucx, mpi_cost_ = mpi, networks_measured_ = true;
    }
    bool networks_measured() const { return networks_measured_; }
    const ChannelCost& measured_cost(Net n) const { return n == Net::mpi ? mpi_cost_ : ucx_cost_; }
    // The network a call of `bytes` (the whole vector's, alike on every
    // rank) takes for its hops off shared memory: identical on every rank.
    // `mpi_allowed` false (a call whose ring may not call the MPI: alike on
    // every rank): UCX where the context has both.
    Net network_for(size_t bytes, bool mpi_allowed = true) const;
    // The process's worker, which the endpoints are made on.
    void use_worker(UcxWorker* worker) { worker_ = worker; }
    UcxWorker* worker() { return worker_; }
    // The endpoints to the ring neighbours (the runtime's, shared with every
    // communicator that reaches the same peers), and the workers' addresses
    // they were made from.
    struct Peer {
        std::shared_ptr<UcxEndpoint> ep;
        std::vector<uint8_t> address;
        bool usable() const { return !ep || ep->usable(); }  // no endpoint: not needed
    };
    void connect(Peer next, Peer prev) {
        next_ = std::move(next);
        prev_ = std::move(prev);
    }
    // Every endpoint is open.  Another communicator's failed ring may have
    // closed a shared one: the runtime then hands this context a new one
    // (Runtime::refresh_endpoints).
    bool endpoints_usable() const {
        return next_.usable() && prev_.usable() && inter_next_.usable() && inter_prev_.usable() &&
               std::all_of(partners_.begin(), partners_.end(), [](const Peer& p) { return p.usable(); });
    }
    Peer* peers_for_refresh(size_t i) {
        Peer* all[] = {&next_, &prev_, &inter_next_, &inter_prev_};
        if (i < 4) return all[i];
        return i - 4 < partners_.size() ? &partners_[i - 4] : nullptr;
    }

    // This rank's place on the ring.
    RingPeers peers() const;
    RingLinks links() const;
    // ... on its node's ring, and on the ring of its lane across the
    // nodes (the hierarchical allreduce's two rings; algo/topology.h).
    RingPeers local_peers() const;
    RingPeers inter_peers() const;

    // Shared-memory inboxes of the node's own ring (topology's local_next
    // and local_prev), set up collectively by the runtime: this rank's own,
    // written by its local predecessor, then its local successor's.  The
    // flat ring uses those whose hop stays on the node; the hierarchical
    // allreduce all of them.
    Status create_inbox(uint32_t depth, size_t slot_bytes, ShmInboxName* name, std::string* error) {
        return ShmInbox::create(depth, slot_bytes, &inbox_, name, error);
    }
    Status open_next_inbox(const ShmInboxName& next, std::string* error) {
        return ShmInbox::open(next, &next_inbox_, error);
    }
    // After every rank has tried: hop_shm[p] says whether the flat ring's
    // hop from position p to p+1 goes through shared memory (identical on
    // every rank); `writer_pid` is the local predecessor's process.
    void finish_shm(const std::vector<int>& hop_shm, pid_t writer_pid);
    // The inboxes come and go: the runtime keeps the inboxes of all
    // contexts within a budget and releases idle ones (runtime/runtime.h);
    // the ranks set them up again, together, when a call finds some rank
    // without them.
    void want_shm(bool for_hier) { wants_shm_ = true, shm_for_hier_ = for_hier; }
    bool wants_shm() const { return wants_shm_; }
    bool shm_for_hier() const { return shm_for_hier_; }
    bool inboxes_held() const { return shm_connected_; }
    void release_inboxes() {
        inbox_.reset();
        next_inbox_.reset();
        shm_connected_ = false;
        send_shm_ = recv_shm_ = any_hop_shm_ = all_hops_shm_ = false;
        note_inbox_bytes();
    }
    // Bytes of shared memory this rank maps for it (readable from any thread).
    size_t inbox_bytes() const { return inbox_bytes_.load(std::memory_order_relaxed); }
    // Held for the whole of a call on this communicator: the runtime never
    // releases the inboxes of a context in use.
    std::mutex& call_mutex() { return call_mutex_; }
    std::atomic<uint64_t> last_used{0};  // the runtime's call counter at this context's last call
    // This rank's two flat hops, and whether every hop of the ring is in shared memory.
    bool send_shm() const { return send_shm_; }
    bool recv_shm() const { return recv_shm_; }
    bool any_hop_shm() const { return any_hop_shm_; }
    bool all_hops_shm() const { return all_hops_shm_; }
    // Each of this rank's same-node hops can pass segments by address: its
    // reader may read its writer with CMA (transport/cma.h).
    bool shm_hops_by_address() const {
        return (!send_shm_ || (next_inbox_ && next_inbox_->writer_readable())) &&
               (!recv_shm_ || (inbox_ && inbox_->writer_readable()));
    }
    ShmInbox* inbox() { return inbox_.get(); }
    ShmInbox* next_inbox() { return next_inbox_.get(); }
    pid_t local_prev_pid() const { return writer_pid_; }

    // The hierarchical allreduce (algo/hierarchical.h): endpoints to the
    // ranks of this rank's lane on the next and previous node.
    void connect_inter(Peer next, Peer prev) {
        inter_next_ = std::move(next);
        inter_prev_ = std::move(prev);
    }
    UcxEndpoint* inter_next() { return inter_next_.ep.get(); }
    UcxEndpoint* inter_prev() { return inter_prev_.ep.get(); }
    // Every rank can run it (agreed at setup), and the model that chooses it.
    bool hier_ready() const { return hier_ready_; }
    // Its halves, the reduce-scatter and the allgather, run where every
    // node holds the same number of ranks (algo/hierarchical.h).
    bool hier_halves_ready() const { return hier_ready_ && topo_.uniform() && topo_.max_ranks_per_node() > 1; }
    void enable_hier(const CostModel& model) { hier_ready_ = true, cost_model_ = model; }
    void disable_hier() { hier_ready_ = false; }
    // Without the hierarchical allreduce, frees the inboxes the flat ring does not use.
    void drop_unused_inboxes() {
        if (!hier_ready_) {
            if (!recv_shm_) inbox_.reset();
            if (!send_shm_) next_inbox_.reset();
        }
        note_inbox_bytes();
    }
    const CostModel& cost_model() const { return cost_model_; }
    // The cost model's pick for an allreduce of `bytes` here
    // (decide/cost_probe.h's schedule_here: the flat ring, the hierarchical
    // allreduce with rings or halving-doublings across nodes, or the
    // halving-doubling across nodes of one rank each), priced on the
    // network that `bytes` take (network_for), with segments of
    // `inter_segment_bytes` across nodes.  The halving-doublings compete
    // once timed.  The shape, not this rank's node: identical on every rank.
    // `part`: a reduce-scatter's or allgather's of `bytes` in all.
    Schedule schedule_for(size_t bytes, size_t inter_segment_bytes, Collective part = Collective::allreduce) const;
    // The device hierarchical allreduce's phase across nodes for a call of
    // `bytes` (decide/cost_probe.h's crossing_here, on the hierarchical
    // allreduce's costs for the network `bytes` take): its lanes' rings
    // (hierarchical_ring) or halving-doublings (hierarchical_halving_doubling,
    // once timed).  Identical on every rank.
    Schedule crossing_for(size_t bytes) const;
    // NEXAR_SHM_COPY=auto's measurements on this communicator.
    ShmCopyChooser& copy_chooser() { return copy_chooser_; }
    // NEXAR_THRESHOLD_BYTES=auto's: which path each size of call takes.
    PathLearner& learner() { return learner_; }
    const PathLearner& learner() const { return learner_; }
    // The halving-doubling across the nodes (algo/halving_doubling.h): the
    // allreduce where every node holds one rank, the hierarchical
    // allreduce's phase across nodes where it is ready (hier_ready()): the
    // endpoints to this rank's partners (link by link; none over the MPI's
    // point-to-point), set up collectively (Runtime::
    // setup_halving_doubling), ready on every rank or on none, and the
    // model that chooses it (the hierarchical allreduce keeps its own).
    using PartnerPeers = std::array<Peer, kMaxHalvingDoublingLinks>;
    void enable_halving_doubling(PartnerPeers partners, const CostModel& model) {
        partners_ = std::move(partners);
        halving_doubling_ready_ = true, cost_model_ = model;
    }
    bool halving_doubling_ready() const { return halving_doubling_ready_; }
    // Its own network costs, fitted to its timed runs (identical on every
    // rank): the ring's alpha and beta do not say what its exchanges cost
    // (a new partner each step, a pause between steps).  Until then the
    // model never picks it.
    void set_halving_doubling_cost(const ChannelCost& c) {
        halving_doubling_cost_ = c, halving_doubling_measured_ = true;
    }
    UcxEndpoint* partner(int link) { return partners_[size_t(link)].ep.get(); }
    // The hierarchical allreduce's model for a call of `bytes`, on the
    // network it takes.
    CostModel hierarchical_costs(size_t bytes) const;
    // Without it, closes the endpoints only it uses.
    void drop_inter() {
        if (hier_ready_) return;
        inter_prev_ = Peer();
        inter_next_ = Peer();
    }

    uint32_t next_sequence() { return sequence_++; }
    // The nonblocking calls' agreements count apart (algo/tag.h): they
    // are numbered at the call's start, rings when they run.
    uint32_t next_agreement_sequence() { return agreement_sequence_++; }
    // n consecutive sequence numbers for one call; the first is returned.
    uint32_t take_sequences(uint32_t n) {
        uint32_t first = sequence_;
        sequence_ += n;
        return first;
    }
    RingScratch& scratch() { return scratch_; }
    // Where each rank's block lies in a reduce-scatter or allgather (in ring
    // elements, by rank) and the chunk spans made of them, sized once.
    struct BlockLayout {
        std::vector<size_t> counts, displs;
        std::vector<Span> spans;
        BlockLayout& sized(int ranks) {
            if (spans.size() != size_t(ranks)) {
                counts.assign(size_t(ranks), 0);
                displs.assign(size_t(ranks), 0);
                spans.assign(size_t(ranks), Span());
            }
            return *this;
        }
    };
    BlockLayout& block_layout() { return block_layout_.sized(size_); }
    // A host buffer of at least `bytes` for a reduce-scatter's partial sums
    // out of place (the receive buffer holds only this rank's block); it
    // grows and is kept.  Null when memory runs out.
    char* work_buffer(size_t bytes) { return work_.get(bytes); }
    // The context's own duplicate of the communicator, for the nonblocking
    // calls' fallbacks (call/nonblocking.h); MPI_COMM_NULL without them.
    MPI_Comm shadow_comm() const { return shadow_; }
    void set_shadow_comm(MPI_Comm c) { shadow_ = c; }
    // Nonblocking calls in flight on it (the runtime keeps its inboxes).
    std::atomic<int> nonblocking_calls{0};
    // The one-shot allreduce's boards (algo/one_shot.h), where every rank
    // shares this node: this rank's own and every other's, by rank, set up
    // collectively by the runtime (Runtime::connect_boards) and kept for
    // the context's life.  Ready on every rank or on none.
    void set_boards(std::vector<std::unique_ptr<ShmInbox>> boards, std::vector<OneShotBoard> views) {
        boards_ = std::move(boards);
        board_views_ = std::move(views);
    }
    bool boards_ready() const { return !board_views_.empty(); }
    const std::vector<OneShotBoard>& boards() const { return board_views_; }
    ShmInbox& board(int rank) { return *boards_[size_t(rank)]; }
    // The next one-shot call's sequence number (from 1; every rank counts alike).
    uint64_t next_one_shot() { return ++one_shot_sequence_; }
    uint64_t one_shot_sequence() const { return one_shot_sequence_; }  // the latest taken
    // The IPC allreduce's state (runtime/ipc_context.h): set up collectively at
    // the first device call that agreed on IPC; null until then, and for
    // good where that set-up failed (ipc_unavailable()).
    IpcContext* ipc() { return ipc_.get(); }
    bool ipc_unavailable() const { return ipc_unavailable_; }
    void set_ipc(std::unique_ptr<IpcContext> ipc) { ipc_ = std::move(ipc), ipc_unavailable_ = !ipc_; }
    // True the first time only: NEXAR_LOG=info says once per context why
    // a device call could not go through IPC.
    bool first_ipc_refusal() { return !ipc_refusal_said_.exchange(true); }
    // GPU streams, events and slots, created on the first device-buffer call.
    DeviceBuffers& device_buffers(const nexar_device_api* api) {
        if (!device_buffers_) device_buffers_.reset(new DeviceBuffers(api));
        return *device_buffers_;
    }

private:
    RingPeers peers_on(int position, int size, int prev_rank, int next_rank) const;
    MPI_Comm comm_;
    int rank_, size_;
    uint32_t id_;
    RingTopology topo_;
    std::vector<uint32_t> tag_ids_;  // by rank
    uint32_t sequence_ = 0;
    uint32_t agreement_sequence_ = 0;
    bool disabled_ = false;
    Net net_ = Net::none;
    MPI_Comm net_comm_ = MPI_COMM_NULL;
    int net_tag_ub_ = 0;
    ChannelCost ucx_cost_, mpi_cost_;
    bool networks_measured_ = false;
    std::atomic<bool> failed_{false};
    UcxWorker* worker_ = nullptr;  // the runtime's; outlives every context
    Peer next_, prev_;  // the same endpoint when prev == next (2 ranks)
    Peer inter_next_, inter_prev_;
    RingScratch scratch_;
    std::unique_ptr<ShmInbox> inbox_;       // written by the local predecessor
    std::unique_ptr<ShmInbox> next_inbox_;  // the local successor's, written here
    pid_t writer_pid_ = 0;
    bool send_shm_ = false, recv_shm_ = false, any_hop_shm_ = false, all_hops_shm_ = false;
    bool hier_ready_ = false;
    PartnerPeers partners_;
    bool halving_doubling_ready_ = false, halving_doubling_measured_ = false;
    ChannelCost halving_doubling_cost_;
    CostModel cost_model_;
    ShmCopyChooser copy_chooser_;
    PathLearner learner_;
    bool wants_shm_ = false, shm_for_hier_ = false, shm_connected_ = false;
    std::mutex call_mutex_;
    std::atomic<size_t> inbox_bytes_{0};
    void note_inbox_bytes() {
        inbox_bytes_.store((inbox_ ? inbox_->mapped_bytes() : 0) + (next_inbox_ ? next_inbox_->mapped_bytes() : 0),
                           std::memory_order_relaxed);
    }
    std::unique_ptr<DeviceBuffers> device_buffers_;
    BlockLayout block_layout_;
    WorkBuffer work_;
    MPI_Comm shadow_ = MPI_COMM_NULL;
    std::vector<std::unique_ptr<ShmInbox>> boards_;  // by rank
    std::vector<OneShotBoard> board_views_;
    uint64_t one_shot_sequence_ = 0;
    std::unique_ptr<IpcContext> ipc_;  // after device_buffers_: goes first (its calls ran on their stream)
    bool ipc_unavailable_ = false;
    std::atomic<bool> ipc_refusal_said_{false};
};

// The network channels of one ring run on a context: UCX's or the MPI's,
// whichever the call takes (CommContext::network_for, decided with the
// call's route); built by the run that uses them, and kept as long as it
// runs.
class NetHop {
public:
    explicit NetHop(CommContext::Net net) : net_(net) {}
    // To `to_rank`, over UCX on endpoint `to` (unused for the MPI's).
    // drive_worker: the UCX send side progresses the worker (where its
    // receive side does not).  Null where the context has no network (or
    // no endpoint): the run is then not valid.
    // `slots`: the scratch's slots its messages take (a depth: 0 .. depth-1).
    SendChannel* send_to(CommContext& ctx, UcxEndpoint* to, int to_rank, SlotBank slots, SegmentEngine& engine,
                         bool drive_worker);
    // From `from_rank` (`from`: its UCX endpoint, watched; `pid`: its
    // process where it shares this node, else 0).  Null where the context
    // has no network.
    RecvChannel* receive_from(CommContext& ctx, UcxEndpoint* from, int from_rank, SlotBank slots,
                              SegmentEngine& engine, pid_t pid);
    // The send side, once made (the bytes it sent, for the stats).
    const SendChannel* out() const;

private:
    CommContext::Net net_;
    std::optional<UcxSendChannel> ucx_out_;
    std::optional<MpiSendChannel> mpi_out_;
    std::optional<UcxRecvChannel> ucx_in_;
    std::optional<MpiRecvChannel> mpi_in_;
};

// This rank's halving-doubling schedule across the nodes for a vector of
// `count` elements (the allreduce, or a half over `blocks` by node:
// algo/halving_doubling.h): its node's place among the nodes.  With count
// 0 it says who the partners are (they depend on nothing else).
HalvingDoublingSchedule halving_doubling_schedule(const CommContext& ctx, size_t count = 0,
                                                  Collective part = Collective::allreduce,
                                                  const PositionBlocks* blocks = nullptr);

// The network channels of a halving-doubling's exchanges on a context
// (algo/halving_doubling.h, ExchangeLinks): each exchange gets a new pair
// to its partner on network `net`, in place of the pair of the exchange
// before it in its slot bank (finished then), so two pairs are held
// whatever the number of partners.  The
// schedule runs over the nodes, among the ranks of this rank's lane (one
// rank a node: every rank; the hierarchical allreduce's phase across nodes
// otherwise): its partners do not depend on the vector's length.
// Requires ctx.halving_doubling_ready() (the partners' endpoints).
class PartnerHops final : public ExchangeLinks {
public:
    PartnerHops(CommContext& ctx, CommContext::Net net, SegmentEngine& engine)
        : ctx_(ctx), net_(net), partners_(halving_doubling_schedule(ctx)), engine_(engine) {}
    ExchangeLink open(int link, int bank, SlotBank slots) override;
    // What every exchange so far sent, and on which kind of channel (none: nothing opened).
    uint64_t bytes_sent() const;
    const SendChannel* out() const { return hops_[0] ? hops_[0]->out() : nullptr; }

private:
    CommContext& ctx_;
    const CommContext::Net net_;
    const HalvingDoublingSchedule partners_;
    SegmentEngine& engine_;
    std::optional<NetHop> hops_[2];  // by slot bank: the latest exchange's channels
    uint64_t earlier_bytes_ = 0;     // sent by the exchanges before them
};

// The rings that time the networks (decide/cost_probe.h, InterRingProbe):
// one sum of `count` floats in place on host memory (buf), with network
// `net` on the hops off shared memory; the context's scratch must hold its
// slots.  `inter`: this rank's lane's ring across the nodes alone (the
// hierarchical allreduce's); `flat`: the whole communicator's ring, its
// same-node hops in shared memory (Runtime::measure_networks).
enum class ProbeRing { inter, flat };
Status run_probe_ring(CommContext& ctx, ProbeRing ring, CommContext::Net net, uint32_t sequence, float* buf,
                      size_t count, const RingOptions& opt, std::string* error);
// The same with the halving-doubling (requires ctx.halving_doubling_ready()),
// on ctx's network; the context's scratch must hold its slots.
Status run_probe_halving_doubling(CommContext& ctx, uint32_t sequence, float* buf, size_t count,
                                  const RingOptions& opt, std::string* error);

}  // namespace nexar
