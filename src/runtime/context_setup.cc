// A communicator's context, set up collectively when the communicator is
// made (or at its first blocking call that takes the ring): which ranks
// share a node, the network (UCX, the MPI's point-to-point, or both,
// timed), the shared-memory inboxes and the one-shot's boards, the
// hierarchical allreduce and its cost model.  The rest of the runtime
// (its start and stop, the contexts' life and budget) is runtime.cc.
#include <mpi.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "base/log.h"
#include "decide/cost_probe.h"
#include "mpi/pmpi.h"
#include "runtime/runtime.h"
#include "transport/cma.h"

namespace nexar {
namespace {

// Which ranks of `comm` share a node: MPI_Comm_split_type's groups, each
// named by its lowest rank of `comm`.  Collective.
RingTopology learn_topology(MPI_Comm comm, int rank, int size) {
    MPI_Comm local = MPI_COMM_NULL;
    int leader = rank;
    if (pmpi::comm_split_type(comm, MPI_COMM_TYPE_SHARED, rank, MPI_INFO_NULL, &local) == MPI_SUCCESS &&
        local != MPI_COMM_NULL) {
        PMPI_Bcast(&leader, 1, MPI_INT, 0, local);  // key = rank: local rank 0 is the lowest
        PMPI_Comm_free(&local);
    }
    std::vector<int> node_of(size_t(size), 0);
    pmpi::allgather(&leader, 1, MPI_INT, node_of.data(), 1, MPI_INT, comm);
    return RingTopology(node_of);
}

// The cost model's pick at a few sizes, for the log: "4KiB ring, 64KiB rhd, ...".
std::string model_picks(const CommContext& ctx, const Config& cfg, std::initializer_list<size_t> sizes) {
    std::string picks;
    for (size_t bytes : sizes) {
        if (!picks.empty()) picks += ", ";
        const bool mpi = ctx.network_for(bytes) == CommContext::Net::mpi;
        picks += format_bytes(bytes) + " " + schedule_name(ctx.schedule_for(bytes, cfg.network_segment_bytes(mpi)));
    }
    return picks;
}

}  // namespace

// Whether this rank may read its inbox's writer with CMA (transport/cma.h),
// and write its successor's memory (ShmCopy::push; proven by reading it:
// the kernel makes the same check for both), unless
// NEXAR_SHM_COPY=slots.  The first answer is the inbox's to tell the
// writer; the second stays with this rank's mapping of its successor's
// inbox.  A refusal is a property of the kernel or container, so it is
// reported once per process.
void Runtime::probe_neighbour_memory(CommContext& ctx, const ShmInboxName& writer, const ShmInboxName& owner) {
    if (config_.shm_copy == ShmCopySetting::slots) {
        if (ctx.inbox()) ctx.inbox()->set_writer_readable(false);
        return;
    }
    std::string why;
    bool unreadable = false, unwritable = false;
    if (ctx.inbox()) {
        bool readable = cma_probe(watchable_pid(writer), CmaProbeWord{writer.probe_address, writer.probe_value}, &why);
        ctx.inbox()->set_writer_readable(readable);
        unreadable = !readable;
    }
    if (ctx.next_inbox()) {
        std::string why_not;
        bool writable = cma_probe(watchable_pid(owner), CmaProbeWord{owner.probe_address, owner.probe_value}, &why_not);
        ctx.next_inbox()->set_owner_writable(writable);
        unwritable = !writable;
        if (!unreadable) why = why_not;
    }
    if ((unreadable || unwritable) && !cma_refusal_reported_.exchange(true)) {
        if (unreadable)
            NEXAR_INFO("same-node hops copy through shared-memory slots only: cannot read a neighbour's memory "
                       "with CMA: %s",
                       why.c_str());
        else
            NEXAR_INFO("same-node hops push nothing (NEXAR_SHM_COPY=push): cannot write a neighbour's memory with "
                       "CMA: %s",
                       why.c_str());
    }
}

// The node's own ring goes through shared-memory inboxes: each rank of a
// node with company creates one, written by its local predecessor, and maps
// its local successor's.  The flat ring uses those whose hop stays on the
// node (the last rank of a node sends over UCX); the hierarchical allreduce
// also needs the hop that closes the node's ring, so that inbox is made
// only when `for_hier`.  Every rank learns every flat hop's kind.  Returns
// whether every rank with company mapped its local successor's inbox.  Collective.
bool Runtime::connect_shm(CommContext& ctx, bool for_hier) {
    const RingTopology& topo = ctx.topology();
    const int me = ctx.rank();
    const bool company = topo.local_size(me) >= 2;
    const bool flat_local_in = topo.same_node(ctx.prev_rank(), me);
    // Slots of one segment each.  A ring that also crosses the network runs
    // at the network's segment size, on every hop.  A call with larger
    // segments (huge counts) takes UCX on every hop.
    constexpr size_t kMaxInboxBytes = size_t(256) << 20;
    uint64_t segment = config_.shm_segment_bytes();
    if (topo.network_hops() > 0) segment = std::max(segment, config_.ucx_segment_bytes());
    size_t slot_bytes = (size_t(segment) + 63) & ~size_t(63);
    uint32_t depth = config_.pipeline_depth;
    std::string error;
    ShmInboxName mine;
    memset(&mine, 0, sizeof mine);
    ShmInbox::identify_owner(&mine);  // the writer's process, watched by whoever it writes to
    Status s = Status::ok;
    if (company && (flat_local_in || for_hier)) {
        if (slot_bytes * depth > kMaxInboxBytes) {
            error = "NEXAR_SEGMENT_BYTES x NEXAR_PIPELINE_DEPTH is over 256 MiB";
            s = Status::unavailable;
        } else {
            s = ctx.create_inbox(depth, slot_bytes, &mine, &error);
        }
    }
    std::vector<ShmInboxName> all(size_t(ctx.size()));
    pmpi::allgather(&mine, int(sizeof mine), MPI_BYTE, all.data(), int(sizeof mine), MPI_BYTE, ctx.comm());
    int opened = 0;
    const int local_next = topo.local_next(me);
    if (company && all[size_t(local_next)].name[0]) {
        Status o = ctx.open_next_inbox(all[size_t(local_next)], &error);
        opened = ok(o) ? 1 : 0;
        if (!ok(o)) s = o;
    }
    probe_neighbour_memory(ctx, all[size_t(topo.local_prev(me))], all[size_t(local_next)]);
    std::vector<int> opened_by_rank(size_t(ctx.size()));  // also: every probe is done
    pmpi::allgather(&opened, 1, MPI_INT, opened_by_rank.data(), 1, MPI_INT, ctx.comm());
    std::vector<int> hop_shm(size_t(ctx.size()));  // by the sender's ring position
    bool every_local_hop = true;
    for (int r = 0; r < ctx.size(); ++r) {
        bool stays = topo.same_node(r, topo.next(r));
        hop_shm[size_t(topo.position(r))] = stays && opened_by_rank[size_t(r)];
        every_local_hop = every_local_hop && (opened_by_rank[size_t(r)] || topo.local_size(r) < 2);
    }
    ctx.finish_shm(hop_shm, watchable_pid(all[size_t(topo.local_prev(me))]));
    const char* net = ctx.network() == CommContext::Net::ucx   ? "over UCX"
                      : ctx.network() == CommContext::Net::mpi ? "over the MPI's point-to-point"
                                                               : "to the MPI's collectives (no network)";
    if (!ok(s))
        NEXAR_INFO("communicator context %u: a hop next to this rank goes %s: %s", ctx.id(), net, error.c_str());
    int shm_hops = 0;
    for (int h : hop_shm) shm_hops += h;
    NEXAR_INFO("communicator context %u: %d node(s); %d of %d ring hops through shared memory (%u slots of %s), "
               "the rest %s",
               ctx.id(), topo.nodes(), shm_hops, ctx.size(), depth, format_bytes(slot_bytes).c_str(), net);
    return every_local_hop;
}

// The one-shot allreduce's boards (algo/one_shot.h), where every rank of
// the communicator shares this node: each rank creates its own, an inbox of
// two slots that only it writes (a call's sequence number is published in
// the head of its slot, algo/one_shot.h's BoardHead), and maps every other
// rank's.  Ready on every rank or on none.  Collective.
void Runtime::connect_boards(CommContext& ctx) {
    // Alike on every rank: rank 0's settings and the communicator's shape.
    if (config_.one_shot_bytes == 0 || ctx.topology().nodes() != 1 || ctx.size() > int(kMaxOneShotRanks)) return;
    // A call takes the one-shot where its vector x (ranks - 1) is at most
    // one_shot_bytes (call/collective_task.cc): its slots need no more.
    const size_t largest = size_t(config_.one_shot_bytes) / size_t(ctx.size() - 1);
    // Each slot: its head (the call's sequence, key and a small input),
    // its input right after it (a reader's next lines), then the rank's
    // note on the call (its agreement, BoardMeeting).
    const size_t input_bytes = (largest + 63) & ~size_t(63);
    const size_t slot_bytes = sizeof(BoardHead) + input_bytes + kBoardNoteBytes;
    const int me = ctx.rank();
    std::string error;
    std::vector<std::unique_ptr<ShmInbox>> boards(size_t(ctx.size()));
    ShmInboxName mine;
    memset(&mine, 0, sizeof mine);
    Status s = ShmInbox::create(2, slot_bytes, &boards[size_t(me)], &mine, &error);
    std::vector<ShmInboxName> all(size_t(ctx.size()));
    pmpi::allgather(&mine, int(sizeof mine), MPI_BYTE, all.data(), int(sizeof mine), MPI_BYTE, ctx.comm());
    for (int r = 0; ok(s) && r < ctx.size(); ++r)
        if (r != me) s = ShmInbox::open(all[size_t(r)], &boards[size_t(r)], &error);
    int ready = ok(s) ? 1 : 0;
    pmpi::allreduce(MPI_IN_PLACE, &ready, 1, MPI_INT, MPI_MIN, ctx.comm());
    if (boards[size_t(me)]) boards[size_t(me)]->unlink();  // every rank has mapped it, or given up
    if (!ready) {
        NEXAR_INFO("communicator context %u: no one-shot allreduce (a rank could not set its board up%s%s)",
                   ctx.id(), ok(s) ? "" : ": ", error.c_str());
        return;
    }
    std::vector<OneShotBoard> views;
    for (std::unique_ptr<ShmInbox>& b : boards) {
        OneShotBoard v;
        for (uint32_t k = 0; k < 2; ++k) {
            v.heads[k] = reinterpret_cast<BoardHead*>(b->slot(k));  // zeroed memory: sequence 0
            v.slots[k] = b->slot(k) + sizeof(BoardHead);
            v.notes[k] = reinterpret_cast<int64_t*>(b->slot(k) + sizeof(BoardHead) + input_bytes);
        }
        v.slot_bytes = input_bytes;
        views.push_back(v);
    }
    ctx.set_boards(std::move(boards), std::move(views));
    NEXAR_INFO("communicator context %u: allreduces up to %s take the one-shot allreduce; every blocking and "
               "nonblocking call's agreement meets on the boards",
               ctx.id(), format_bytes(largest).c_str());
}

namespace {

// The cost probe's rings (decide/cost_probe.h) on a context's links, over
// one network.  ProbeRing::inter: this rank's lane's ring across the nodes
// (P nodes, L lanes); ProbeRing::flat: the whole communicator's ring,
// its n ranks as "nodes" of one rank, so that the fit is the flat ring's
// 2(n-1) steps of 2(n-1)/n of the bytes (channel_ring_seconds).
class ContextRings final : public InterRingProbe {
public:
    ContextRings(CommContext& ctx, ProbeRing ring, CommContext::Net net) : ctx_(ctx), ring_(ring), net_(net) {}
    MPI_Comm comm() const override { return ctx_.comm(); }
    int nodes() const override { return ring_ == ProbeRing::flat ? ctx_.size() : ctx_.topology().nodes(); }
    int lanes() const override { return ring_ == ProbeRing::flat ? 1 : ctx_.topology().lanes(); }
    bool takes_part() const override { return ring_ == ProbeRing::flat || ctx_.topology().lane(ctx_.rank()) >= 0; }
    Status reserve(size_t count, const RingOptions& opt) override {
        return ctx_.scratch().reserve(ring_slot_bytes(count, nodes(), sizeof(float), opt.segment_bytes), opt.depth);
    }
    Status run(float* buf, size_t count, const RingOptions& opt, std::string* error) override {
        const uint32_t sequence = ctx_.next_sequence();  // on every rank (InterRingProbe::takes_part)
        return takes_part() ? run_probe_ring(ctx_, ring_, net_, sequence, buf, count, opt, error) : Status::ok;
    }

private:
    CommContext& ctx_;
    ProbeRing ring_;
    CommContext::Net net_;
};

// The halving-doubling across the nodes, as the probe times it: every
// lane's at once (one rank a node: the allreduce; else the
// hierarchical allreduce's phase across nodes), its messages and the bytes
// through a node's link in the model's terms (algo/cost_model.h).
// Requires ctx.halving_doubling_ready().
class ContextHalvingDoubling final : public InterRingProbe {
public:
    explicit ContextHalvingDoubling(CommContext& ctx) : ctx_(ctx) {}
    MPI_Comm comm() const override { return ctx_.comm(); }
    int nodes() const override { return ctx_.topology().nodes(); }
    int lanes() const override { return ctx_.topology().lanes(); }
    bool takes_part() const override { return ctx_.topology().lane(ctx_.rank()) >= 0; }
    Status reserve(size_t count, const RingOptions& opt) override {
        return ctx_.scratch().reserve(segment_bound(count, segment_elems(opt.segment_bytes, sizeof(float))) * sizeof(float),
                                      opt.depth);
    }
    Status run(float* buf, size_t count, const RingOptions& opt, std::string* error) override {
        const uint32_t sequence = ctx_.next_sequence();  // on every rank (InterRingProbe::takes_part)
        return takes_part() ? run_probe_halving_doubling(ctx_, sequence, buf, count, opt, error) : Status::ok;
    }
    double messages() const override { return halving_doubling_terms(nodes()).messages; }
    double bytes_factor() const override { return halving_doubling_terms(nodes()).bytes_factor * lanes(); }

private:
    CommContext& ctx_;
};

// "4 nodes x 2 ranks", or for nodes of different sizes "3 nodes of 2-3
// ranks, 2 lanes", for the log.
std::string shape_text(const RingTopology& t) {
    char text[96];
    const NodeShape s = t.shape();
    if (t.uniform())
        snprintf(text, sizeof text, "%d node%s x %d rank%s", s.nodes, s.nodes == 1 ? "" : "s", s.largest,
                 s.largest == 1 ? "" : "s");
    else
        snprintf(text, sizeof text, "%d nodes of %d-%d ranks, %d lane%s", s.nodes, t.min_ranks_per_node(), s.largest,
                 s.lanes, s.lanes == 1 ? "" : "s");
    return text;
}

// The options of the rings across nodes over network `net` (the probe's
// as the calls': call/call_plan.h, network_segment).
RingOptions inter_ring_options(const Config& cfg, CommContext::Net net) {
    RingOptions opt;
    opt.segment_bytes = cfg.network_segment_bytes(net == CommContext::Net::mpi);
    opt.depth = cfg.pipeline_depth;
    opt.timeout_s = cfg.timeout_s;
    return opt;
}

}  // namespace

// The hierarchical allreduce needs a node with company (2 ranks or more;
// nodes of different sizes cross in lanes, algo/topology.h), the node
// rings in shared memory and,
// for each rank that carries a lane (algo/topology.h), endpoints to its
// lane on the neighbouring nodes, on every rank; NEXAR_ALGORITHM=auto then
// times the channels (decide/cost_probe.h).  Collective.
void Runtime::setup_hierarchical(CommContext& ctx, const std::vector<uint8_t>& addresses,
                                 const std::vector<int>& lens, const std::vector<int>& displs) {
    const RingTopology& topo = ctx.topology();
    const int me = ctx.rank();
    std::string error;
    Status s = Status::ok;
    // The MPI's point-to-point needs no endpoint; a rank without a lane none.
    if (ctx.network() == CommContext::Net::ucx && topo.lane(me) >= 0) {
        CommContext::Peer to_next, to_prev;
        s = endpoints_to(addresses, lens, displs, topo.inter_next(me), topo.inter_prev(me), &to_next, &to_prev,
                         &error);
        if (ok(s)) ctx.connect_inter(std::move(to_next), std::move(to_prev));
    }
    bool local_ring = connect_shm(ctx, true);
    int ready = ok(s) && local_ring ? 1 : 0;
    pmpi::allreduce(MPI_IN_PLACE, &ready, 1, MPI_INT, MPI_MIN, ctx.comm());
    if (!ok(s)) NEXAR_INFO("communicator context %u: no inter-node endpoints: %s", ctx.id(), error.c_str());
    if (!ready) {
        NEXAR_INFO("communicator context %u: the hierarchical allreduce cannot run (a node ring or endpoint is "
                   "missing); the flat ring serves every call", ctx.id());
        return;
    }
    CostModel model = default_cost_model();
    bool measured = false;
    if (config_.algorithm == Algorithm::automatic) {
        ContextRings rings(ctx, ProbeRing::inter, ctx.network());
        Status probed = probe_costs(rings, inter_ring_options(config_, ctx.network()), &model, &error);
        measured = ok(probed);
        if (probed == Status::transport_error) {  // the same on every rank
            ctx.mark_failed();  // its endpoints may be out of step
            NEXAR_WARN("communicator context %u: timing the links failed (%s); its allreduces pass through to MPI",
                       ctx.id(), error.c_str());
            return;
        }
        if (!measured)
            NEXAR_WARN("communicator context %u: timing the links failed (%s); the model uses its defaults", ctx.id(),
                       error.c_str());
    }
    ctx.enable_hier(model);
    const std::string when = model_picks(ctx, config_, {1 << 20, 8 << 20, 64 << 20, 512 << 20});
    NEXAR_INFO("communicator context %u: %s; hierarchical allreduce ready; cost model (%s): "
               "shm alpha=%.1fus beta=%.2fGB/s, network alpha=%.1fus beta=%.3fGB/s per node; "
               "NEXAR_ALGORITHM=auto picks: %s",
               ctx.id(), shape_text(topo).c_str(), measured ? "measured" : "defaults", model.shm.alpha_s * 1e6,
               model.shm.bytes_per_s / 1e9, model.net.alpha_s * 1e6, model.net.bytes_per_s / 1e9, when.c_str());
}

// The halving-doubling across the nodes (algo/halving_doubling.h): the
// allreduce across nodes of one rank each, or the hierarchical
// allreduce's phase across nodes (where it is ready), among the ranks of
// each lane (algo/topology.h).  It needs endpoints to this rank's partners on every
// rank (over UCX; the MPI's point-to-point reaches every rank);
// NEXAR_ALGORITHM=auto then times the flat ring (one rank a node, where
// measure_networks has not; the hierarchical allreduce timed its rings)
// and the halving-doubling itself (decide/cost_probe.h).  Collective.
void Runtime::setup_halving_doubling(CommContext& ctx, const UcxAddresses& addresses) {
    const RingTopology& topo = ctx.topology();
    const HalvingDoublingSchedule schedule = halving_doubling_schedule(ctx);
    const bool hierarchical = ctx.hier_ready();
    const int lane = topo.lane(ctx.rank());  // -1: this rank's node ring is all it runs
    CommContext::PartnerPeers partners;
    std::string error;
    Status s = schedule.valid() ? Status::ok : Status::invalid_argument;
    if (ctx.network() == CommContext::Net::ucx && lane >= 0)
        for (int l = 0; ok(s) && l < schedule.links(); ++l)
            if (schedule.link_partner(l) >= 0)
                s = endpoint_of(addresses.all, addresses.lens, addresses.displs,
                                topo.lane_rank(schedule.link_partner(l), lane), &partners[size_t(l)], &error);
    int ready = ok(s) ? 1 : 0;
    pmpi::allreduce(MPI_IN_PLACE, &ready, 1, MPI_INT, MPI_MIN, ctx.comm());
    if (!ready) {
        NEXAR_INFO("communicator context %u: the halving-doubling across nodes cannot run (%s); the rings serve "
                   "every call", ctx.id(), ok(s) ? "an endpoint is missing on another rank" : error.c_str());
        return;
    }
    // The ring's costs: the hierarchical allreduce's (setup_hierarchical),
    // those measure_networks found, else the flat ring's timed here; then
    // the halving-doubling's own (CommContext::set_halving_doubling_cost).
    // NEXAR_ALGORITHM=rhd times nothing.
    CostModel model = hierarchical ? ctx.cost_model() : default_cost_model();
    const bool timed = config_.algorithm == Algorithm::automatic;
    const char* ring_costs = hierarchical ? "the hierarchical allreduce's" : ctx.networks_measured() ? "measured"
                                                                                                      : "defaults";
    const char* own_costs = "not timed: the model keeps the ring";
    const RingOptions opt = inter_ring_options(config_, ctx.network());
    if (timed && !hierarchical && !ctx.networks_measured()) {
        ContextRings rings(ctx, ProbeRing::flat, ctx.network());
        Status probed = probe_costs(rings, opt, &model, &error);
        if (probed == Status::transport_error) {  // the same on every rank
            ctx.mark_failed();  // its endpoints may be out of step
            NEXAR_WARN("communicator context %u: timing the links failed (%s); its allreduces pass through to MPI",
                       ctx.id(), error.c_str());
            return;
        }
        if (ok(probed))
            ring_costs = "measured";
        else
            NEXAR_WARN("communicator context %u: timing the links failed (%s); the model uses its defaults", ctx.id(),
                       error.c_str());
    }
    ctx.enable_halving_doubling(std::move(partners), model);
    ChannelCost own = ctx.networks_measured() && !hierarchical ? ctx.measured_cost(ctx.network()) : model.net;
    if (timed) {
        CostModel fitted;
        ContextHalvingDoubling runs(ctx);
        Status probed = probe_costs(runs, opt, &fitted, &error);
        if (probed == Status::transport_error) {  // the same on every rank
            ctx.mark_failed();
            NEXAR_WARN("communicator context %u: timing the halving-doubling failed (%s); its allreduces pass "
                       "through to MPI", ctx.id(), error.c_str());
            return;
        }
        if (ok(probed)) {
            ctx.set_halving_doubling_cost(own = fitted.net);
            own_costs = "measured";
        } else {
            NEXAR_WARN("communicator context %u: timing the halving-doubling failed (%s); the model keeps the "
                       "ring", ctx.id(), error.c_str());
        }
    }
    // (Where both networks were timed, each call's ring is priced on its own
    // network's costs; the halving-doubling's as schedule_here prices it.)
    const ChannelCost& ring =
        ctx.networks_measured() && !hierarchical ? ctx.measured_cost(ctx.network()) : model.net;
    own = capped_halving_cost(own, ring);
    const std::string when = model_picks(ctx, config_, {4 << 10, 64 << 10, 1 << 20, 16 << 20});
    NEXAR_INFO("communicator context %u: %s; %s ready (%d participants, %s); network %s: ring "
               "alpha=%.1fus beta=%.3fGB/s (%s), halving-doubling alpha=%.1fus beta=%.3fGB/s (%s); "
               "NEXAR_ALGORITHM=%s picks: %s",
               ctx.id(), shape_text(topo).c_str(),
               hierarchical ? "the hierarchical allreduce's halving-doubling across nodes"
                            : "halving-doubling allreduce",
               schedule.participants(),
               schedule.participants() == topo.nodes() ? "no fold" : "the others fold in",
               CommContext::network_name(ctx.network()), ring.alpha_s * 1e6, ring.bytes_per_s / 1e9, ring_costs,
               own.alpha_s * 1e6, own.bytes_per_s / 1e9, own_costs, algorithm_name(config_.algorithm),
               config_.algorithm == Algorithm::rhd ? "rhd at every size" : when.c_str());
}

// The network of ctx (CommContext::network()), the same on every rank:
// UCX where every rank reached its ring neighbours over it (and NEXAR_NET
// is not mpi); else the MPI's point-to-point on a private duplicate of the
// communicator where NEXAR_NET asks for it or, by default, where the
// communicator spans nodes or shared memory is off (on one node shared
// memory carries every hop: no duplicate is made); else none.  Where UCX
// is the network across nodes and NEXAR_NET=auto, the duplicate is made
// too: both are timed once the rings are set up (measure_networks), and
// each call takes the faster for its size.  Collective.
void Runtime::connect_network(CommContext& ctx, UcxAddresses* addresses, std::string* error) {
    if (config_.net != NetSetting::mpi) connect_ucx(ctx, addresses, error);
    const bool spans_nodes = ctx.topology().nodes() > 1;
    if (ctx.network_ready()) {
        if (config_.net != NetSetting::automatic || !spans_nodes) return;
        int tag_ub = 0;
        MPI_Comm net = duplicate_for_network(ctx, &tag_ub);
        if (net != MPI_COMM_NULL) ctx.offer_mpi_beside_ucx(net, tag_ub);
        return;
    }
    const bool wanted = config_.net == NetSetting::mpi ||
                        (config_.net == NetSetting::automatic && (spans_nodes || !config_.shm));
    if (!wanted) return;
    int tag_ub = 0;
    MPI_Comm net = duplicate_for_network(ctx, &tag_ub);
    if (net == MPI_COMM_NULL) return;
    ctx.use_mpi_network(net, tag_ub);
    if (ctx.rank() == 0)
        NEXAR_INFO("communicator context %u: hops off shared memory take the MPI's point-to-point (%s)", ctx.id(),
                   config_.net == NetSetting::mpi ? "NEXAR_NET=mpi" : "UCX does not run on every rank");
}

// The MPI's point-to-point network for ctx: a duplicate of its
// communicator that returns errors (a message of the wrong length is the
// call's error, not the job's), made on every rank or on none
// (MPI_COMM_NULL), and the largest tag it takes.  Collective.
MPI_Comm Runtime::duplicate_for_network(CommContext& ctx, int* tag_ub) {
    MPI_Comm net = MPI_COMM_NULL;
    int made = pmpi::comm_dup(ctx.comm(), &net) == MPI_SUCCESS && net != MPI_COMM_NULL ? 1 : 0;
    pmpi::allreduce(MPI_IN_PLACE, &made, 1, MPI_INT, MPI_MIN, ctx.comm());  // on every rank, or on none
    if (!made) {
        if (net != MPI_COMM_NULL) PMPI_Comm_free(&net);
        NEXAR_WARN("communicator context %u: no duplicate of the communicator for the MPI's point-to-point", ctx.id());
        return MPI_COMM_NULL;
    }
    PMPI_Comm_set_errhandler(net, MPI_ERRORS_RETURN);
    int* ub = nullptr;
    int found = 0;
    PMPI_Comm_get_attr(MPI_COMM_WORLD, MPI_TAG_UB, &ub, &found);
    *tag_ub = found && ub ? *ub : 32767;
    return net;
}

// Where ctx has both networks (CommContext::both_networks): times the
// flat ring (shared memory on its same-node hops, the network on the
// others) over UCX and over the MPI's point-to-point, and fits each
// network's alpha and beta to it (decide/cost_probe.h), so that each call
// takes the faster for its size (CommContext::network_for).  The flat
// ring exists on every communicator, whatever its nodes' sizes.  Where the
// times fit no model (a noisy machine), every call keeps UCX.  Collective.
void Runtime::measure_networks(CommContext& ctx) {
    // Each network's segments on every hop, as a call's ring has them
    // (connect_shm sizes the slots for the larger).
    std::string error;
    CostModel u, m;
    ContextRings over_ucx(ctx, ProbeRing::flat, CommContext::Net::ucx);
    ContextRings over_mpi(ctx, ProbeRing::flat, CommContext::Net::mpi);
    // Each status is the same on every rank (decide/cost_probe.h).
    const Status over_ucx_ran =
        probe_costs(over_ucx, inter_ring_options(config_, CommContext::Net::ucx), &u, &error);
    if (over_ucx_ran == Status::transport_error) {
        ctx.mark_failed();  // its endpoints may be out of step
        NEXAR_WARN("communicator context %u: timing the links failed (%s); its calls pass through to MPI", ctx.id(),
                   error.c_str());
        return;
    }
    std::string mpi_error;
    const Status over_mpi_ran =
        probe_costs(over_mpi, inter_ring_options(config_, CommContext::Net::mpi), &m, &mpi_error);
    if (over_mpi_ran == Status::transport_error) {  // the MPI's point-to-point is not used
        NEXAR_WARN("communicator context %u: the rings over the MPI's point-to-point failed (%s); calls take UCX",
                   ctx.id(), mpi_error.c_str());
        return;
    }
    // For the test suite: costs that make the MPI's point-to-point the
    // faster from that many bytes on (UCX below), so that one run crosses
    // from one network to the other whatever the links measured (or
    // whether their times fitted a model).
    const char* test_from = getenv("NEXAR_TEST_MPI_NET_FROM");
    uint64_t from = 0;
    if (test_from && parse_size(test_from, &from) && from > 0) {
        u.net = {0, 1e9};
        m.net = {double(from) / ctx.size() * 0.5e-9, 2e9};  // equal at `from` (channel_ring_seconds)
    } else if (!ok(over_ucx_ran) || !ok(over_mpi_ran)) {
        NEXAR_WARN("communicator context %u: timing UCX and the MPI's point-to-point failed (%s); calls take UCX",
                   ctx.id(), !ok(over_ucx_ran) ? error.c_str() : mpi_error.c_str());
        return;
    }
    ctx.set_network_costs(u.net, m.net);
    // Where each takes over, for the log.
    std::string when;
    for (uint64_t bytes = 4 << 10; bytes <= (uint64_t(1) << 30); bytes <<= 2) {
        if (!when.empty()) when += ", ";
        when += format_bytes(bytes) + " " + CommContext::network_name(ctx.network_for(size_t(bytes)));
    }
    NEXAR_INFO("communicator context %u: networks measured on its ring of %d: UCX alpha=%.1fus beta=%.3fGB/s, "
               "the MPI's point-to-point alpha=%.1fus beta=%.3fGB/s; NEXAR_NET=auto picks: %s",
               ctx.id(), ctx.size(), u.net.alpha_s * 1e6, u.net.bytes_per_s / 1e9, m.net.alpha_s * 1e6,
               m.net.bytes_per_s / 1e9, when.c_str());
}

// Where every rank of ctx runs UCX: every worker's address (into
// *addresses), and endpoints to this rank's ring neighbours; then the UCX
// network on every rank, or on none (a rank that could not connect says
// why).  Collective.
void Runtime::connect_ucx(CommContext& ctx, UcxAddresses* addresses, std::string* error) {
    const int size = ctx.size();
    static const std::vector<uint8_t> none;
    const std::vector<uint8_t>& mine = worker_ ? worker_->address() : none;
    int my_len = int(mine.size());
    std::vector<int>& lens = addresses->lens;
    std::vector<int>& displs = addresses->displs;
    lens.assign(size_t(size), 0);
    displs.assign(size_t(size), 0);
    pmpi::allgather(&my_len, 1, MPI_INT, lens.data(), 1, MPI_INT, ctx.comm());
    size_t total = 0;
    bool everyone = true;
    for (int i = 0; i < size; ++i) displs[size_t(i)] = int(total), total += size_t(lens[size_t(i)]), everyone &= lens[size_t(i)] > 0;
    if (!everyone) {
        if (ctx.rank() == 0)
            NEXAR_INFO("communicator context %u: UCX does not run on %s", ctx.id(), worker_ ? "every rank" : "rank 0");
        return;
    }
    addresses->all.assign(total, 0);
    PMPI_Allgatherv(mine.data(), my_len, MPI_BYTE, addresses->all.data(), lens.data(), displs.data(), MPI_BYTE,
                    ctx.comm());
    ctx.use_worker(worker_.get());
    CommContext::Peer to_next, to_prev;
    Status s = endpoints_to(addresses->all, lens, displs, ctx.next_rank(), ctx.prev_rank(), &to_next, &to_prev, error);
    if (ok(s)) ctx.connect(std::move(to_next), std::move(to_prev));
    // Everyone connected, or the network takes no hop.
    int connected = ok(s) ? 1 : 0;
    pmpi::allreduce(MPI_IN_PLACE, &connected, 1, MPI_INT, MPI_MIN, ctx.comm());
    if (!ok(s)) NEXAR_WARN("could not connect to ring neighbours over UCX: %s", error->c_str());
    if (connected) {
        ctx.use_ucx_network();
    } else {
        // No hop takes UCX: no endpoint of it may hold a call back.
        ctx.connect(CommContext::Peer(), CommContext::Peer());
        ctx.use_worker(nullptr);
        NEXAR_WARN("communicator context %u: UCX could not connect every rank; its rings take %s", ctx.id(),
                   config_.net == NetSetting::ucx ? "shared memory only (NEXAR_NET=ucx)"
                                                  : "shared memory, and the MPI's point-to-point across nodes");
    }
}

CommContext* Runtime::context_for(MPI_Comm comm, std::string* error) {
    void* value = nullptr;
    int found = 0;
    PMPI_Comm_get_attr(comm, comm_keyval_, &value, &found);
    if (found) return static_cast<CommContext*>(value);

    int rank = 0, size = 0;
    PMPI_Comm_rank(comm, &rank);
    PMPI_Comm_size(comm, &size);

    // 1. This rank's tag id for the communicator (runtime/comm_context.h),
    //    and whether every member has one.
    const uint32_t id = allocate_tag_id();
    int missing = id == 0 ? 1 : 0;
    pmpi::allreduce(MPI_IN_PLACE, &missing, 1, MPI_INT, MPI_MAX, comm);
    auto* ctx = new CommContext(comm, rank, size, id, learn_topology(comm, rank, size));
    touch(*ctx);  // the newest: never the first to give its inboxes up

    if (missing) {
        ctx->disable();
        NEXAR_INFO("communicator context %u: a rank has no free tag id; its allreduces pass through", id);
    } else {
        // 2. Every rank's tag id, and the network (UCX) where every rank runs it.
        std::vector<int> ids(static_cast<size_t>(size));
        int my_id = int(id);
        pmpi::allgather(&my_id, 1, MPI_INT, ids.data(), 1, MPI_INT, comm);
        ctx->set_tag_ids(std::vector<uint32_t>(ids.begin(), ids.end()));
        UcxAddresses addresses;
        connect_network(*ctx, &addresses, error);
        const RingTopology& t = ctx->topology();
        if (!ctx->network_ready() && t.nodes() > 1) {
            // Nothing of nexar's crosses nodes without it.
            ctx->disable();
            NEXAR_INFO("communicator context %u spans %d nodes and has no network (NEXAR_NET=%s): its calls pass "
                       "through to MPI", id, t.nodes(), net_setting_name(config_.net));
        } else if (config_.host_buffers && config_.shm) {
            bool for_hier = ctx->network_ready() && t.nodes() >= 2 && t.max_ranks_per_node() >= 2 &&
                            config_.algorithm != Algorithm::ring;
            ctx->want_shm(for_hier);
            if (for_hier)
                setup_hierarchical(*ctx, addresses.all, addresses.lens, addresses.displs);
            else
                connect_shm(*ctx, false);
            connect_boards(*ctx);
            if (ctx->both_networks() && !ctx->failed()) measure_networks(*ctx);
            ctx->drop_unused_inboxes();
            ctx->drop_inter();
            keep_inboxes_within_budget(ctx);
        }
        // The halving-doubling across nodes of one rank each; at 2 nodes it
        // is the ring (one exchange each way): only where asked for.
        // With several ranks a node, it is the hierarchical allreduce's phase
        // across nodes (where that is ready).
        if (ctx->network_ready() && !ctx->disabled() && !ctx->failed() &&
            (t.max_ranks_per_node() == 1 || ctx->hier_ready()) && config_.host_buffers &&
            ((config_.algorithm == Algorithm::automatic && t.nodes() >= 3) ||
             (config_.algorithm == Algorithm::rhd && t.nodes() >= 2)))
            setup_halving_doubling(*ctx, addresses);
    }
    // The nonblocking calls' fallbacks go on a duplicate (call/nonblocking.h).
    MPI_Comm shadow = MPI_COMM_NULL;
    if (!ctx->disabled() && config_.nonblocking && pmpi::comm_dup(comm, &shadow) == MPI_SUCCESS)
        ctx->set_shadow_comm(shadow);
    {
        std::lock_guard<std::mutex> reg(registry_mutex_);
        registry_.insert(ctx);
    }
    PMPI_Comm_set_attr(comm, comm_keyval_, ctx);
    NEXAR_DEBUG("communicator context %u created (rank %d of %d)", id, rank, size);
    return ctx;
}

}  // namespace nexar
