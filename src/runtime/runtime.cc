#include "runtime/runtime.h"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "base/log.h"
#include "decide/cost_probe.h"
#include "memory/device.h"
#include "mpi/mpi_family.h"
#include "mpi/pmpi.h"
#include "nexar/nexar.h"
#include "reduce/mpi_types.h"
#include "runtime/job_report.h"
#include "runtime/stats.h"
#include "transport/cma.h"
#include "transport/stage_profile.h"

namespace nexar {

namespace {
std::atomic<Runtime*> g_runtime{nullptr};
std::atomic<bool> g_stopped{false};
std::mutex g_lifecycle_mutex;
// Set while this thread starts the runtime: a call that the MPI makes back
// into nexar meanwhile must not start it again.
thread_local bool t_starting = false;

// A library built for another MPI, or another major version of it, can load
// without a word (Open MPI 4.x and 5.x both name theirs libmpi.so.40), and
// then misbehave: say so once.
void warn_if_built_for_another_mpi() {
    const std::string why = mpi_mismatch(mpi_built_for(), mpi_running());
    if (!why.empty()) NEXAR_WARN("%s", why.c_str());
}
}  // namespace

Runtime* Runtime::get() { return g_runtime.load(std::memory_order_acquire); }

void Runtime::start(int thread_level) {
    std::lock_guard<std::mutex> lock(g_lifecycle_mutex);
    if (get() || g_stopped.load()) return;
    struct Starting {
        Starting() { t_starting = true; }
        ~Starting() { t_starting = false; }
    } starting;
    auto* rt = new Runtime();
    rt->init(thread_level);
    g_runtime.store(rt, std::memory_order_release);
    // Nonblocking calls cannot set a communicator's ring up (it waits for
    // the other ranks): MPI_COMM_WORLD's is ready before the first one,
    // where host buffers may go to the ring.
    rt->prepare_context(MPI_COMM_WORLD);
}

void Runtime::prepare_context(MPI_Comm comm) {
    // Every rank decides alike: rank 0's settings and the communicator's own
    // shape.  (A rank without UCX takes part too: context_for disables the
    // context for all.)
    if (!config_.enable || !config_.nonblocking || !config_.host_buffers) return;
    int inter = 0, size = 0;
    PMPI_Comm_test_inter(comm, &inter);
    PMPI_Comm_size(comm, &size);
    if (inter || size < 2 || uint64_t(size) > kMaxRingRanks) return;
    std::string error;
    context_for(comm, &error);
}

Runtime* Runtime::start_late(MPI_Comm comm) {
    if (t_starting || g_stopped.load(std::memory_order_relaxed)) return nullptr;
    int initialized = 0, finalized = 0;
    PMPI_Initialized(&initialized);
    PMPI_Finalized(&finalized);
    if (!initialized || finalized) return nullptr;
    int order = MPI_UNEQUAL;
    if (comm == MPI_COMM_NULL || PMPI_Comm_compare(comm, MPI_COMM_WORLD, &order) != MPI_SUCCESS ||
        (order != MPI_IDENT && order != MPI_CONGRUENT)) {
        static std::atomic<bool> said{false};
        if (!said.exchange(true))
            NEXAR_WARN("MPI was initialized without passing through libnexar_pmpi (loaded after MPI_Init?): "
                       "nexar starts at the first collective call on MPI_COMM_WORLD, and calls before it pass "
                       "through to MPI");
        return nullptr;
    }
    int provided = MPI_THREAD_SINGLE;
    PMPI_Query_thread(&provided);
    start(provided);
    Runtime* rt = get();
    if (rt) NEXAR_INFO("started at the first collective call on MPI_COMM_WORLD (MPI_Init did not pass through nexar)");
    return rt;
}

namespace {
InFlightCalls g_in_flight;  // constant-initialized: set before any constructor runs
}  // namespace

void set_in_flight_calls(const InFlightCalls& calls) { g_in_flight = calls; }

void Runtime::stop() {
    std::lock_guard<std::mutex> lock(g_lifecycle_mutex);
    g_stopped.store(true);
    Runtime* rt = get();
    if (!rt) return;
    if (g_in_flight.stop_progress) g_in_flight.stop_progress();  // it uses the contexts and the worker
    // Contexts first (they hold endpoints and inboxes); the endpoint cache,
    // the worker and the UCX context go with the runtime, in that order.
    std::vector<MPI_Comm> comms;
    {
        std::lock_guard<std::mutex> reg(rt->registry_mutex_);
        for (CommContext* c : rt->registry_) comms.push_back(c->comm());
    }
    for (MPI_Comm c : comms) PMPI_Comm_delete_attr(c, rt->comm_keyval_);
    if (rt->comm_keyval_ != MPI_KEYVAL_INVALID) PMPI_Comm_free_keyval(&rt->comm_keyval_);
    free_mpi_types();
    if (rt->config_.stats) fprintf(stderr, "%s\n", stats_line(rt->world_rank_, process_stats()).c_str());
    finish_job_report(rt->config_, rt->world_rank_);
    if (rt->config_.gpu_profile && process_stage_totals().calls > 0)
        fprintf(stderr, "%s\n", stage_line(rt->world_rank_, process_stage_totals()).c_str());
    g_runtime.store(nullptr, std::memory_order_release);
    delete rt;
}

Runtime::~Runtime() {
    std::lock_guard<std::mutex> reg(registry_mutex_);
    for (CommContext* c : registry_) delete c;  // only if MPI never called the delete callbacks
    registry_.clear();
    for (CommContext* c : orphans_) delete c;  // persistent requests never freed
    orphans_.clear();
}

void Runtime::init(int thread_level) {
    PMPI_Comm_rank(MPI_COMM_WORLD, &world_rank_);
    set_log_rank(world_rank_);

    std::vector<std::string> problems;
    Config mine = parse_config([](const char* name) { return getenv(name); }, &problems);
    set_log_level(mine.log_level);
    if (world_rank_ == 0)
        for (const std::string& p : problems) NEXAR_WARN("%s", p.c_str());
    // All ranks use rank 0's settings so that they decide alike.
    config_ = mine;
    PMPI_Bcast(&config_, sizeof config_, MPI_BYTE, 0, MPI_COMM_WORLD);
    set_log_level(config_.log_level);
    if (config_ != mine)
        NEXAR_WARN("this rank's NEXAR_* settings differ from rank 0's; rank 0's are used on every rank (%s)",
                   describe(config_).c_str());
    if (world_rank_ == 0) {
        const MpiIdentity built = mpi_built_for();
        NEXAR_INFO("nexar %s, built for %s", NEXAR_VERSION,
                   built.family.empty() ? "an unknown MPI" : (built.family + " " + built.version).c_str());
    }
    NEXAR_INFO("settings: %s", describe(config_).c_str());
    if (world_rank_ == 0) warn_if_built_for_another_mpi();

    start_job_report(config_);  // a job with nexar disabled is reported too

    // nexar.h's 16-bit float datatypes work even with nexar disabled.
    init_mpi_types();

    // The self attribute's delete callback runs first thing in
    // PMPI_Finalize: it tears nexar down even if MPI_Finalize was bypassed.
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, &Runtime::on_self_delete, &self_keyval_, nullptr);
    PMPI_Comm_set_attr(MPI_COMM_SELF, self_keyval_, nullptr);

    if (!config_.enable) return;
    PMPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, &Runtime::on_comm_delete, &comm_keyval_, nullptr);

    // Alike on every rank: nonblocking calls over the MPI's point-to-point
    // are decided by it (call/collective_task.cc).
    int multiple = thread_level == MPI_THREAD_MULTIPLE ? 1 : 0;
    pmpi::allreduce(MPI_IN_PLACE, &multiple, 1, MPI_INT, MPI_MIN, MPI_COMM_WORLD);
    multi_thread_ = multiple != 0;
    const bool spans = job_spans_nodes();
    // NEXAR_NET=mpi: no hop takes UCX, so none is started (a UCX that
    // misbehaves on this fabric is never touched).
    if (config_.net == NetSetting::mpi)
        NEXAR_INFO("NEXAR_NET=mpi: UCX is not started; hops off shared memory take the MPI's point-to-point");
    else
        start_ucx(spans);
    start_device();
}

// Whether some node holds only part of MPI_COMM_WORLD.  Collective.
bool Runtime::job_spans_nodes() const {
    int local_size = 0, world_size = 0, spans = 0;
    MPI_Comm local = MPI_COMM_NULL;
    PMPI_Comm_size(MPI_COMM_WORLD, &world_size);
    if (pmpi::comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, world_rank_, MPI_INFO_NULL, &local) ==
            MPI_SUCCESS && local != MPI_COMM_NULL) {
        PMPI_Comm_size(local, &local_size);
        PMPI_Comm_free(&local);
    }
    spans = local_size < world_size ? 1 : 0;
    pmpi::allreduce(MPI_IN_PLACE, &spans, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    return spans != 0;
}

// The process's UCX context and worker, or none (said once: a job that
// spans nodes takes the MPI's point-to-point there instead).
void Runtime::start_ucx(bool spans) {
    // Across nodes UCX's rendezvous protocol (the receiver fetches each
    // large message after a handshake) left the link 40 % idle over TCP
    // with 1 MiB segments; eager sends reached 95 % of it (docs/how-it-works.md,
    // "Across nodes").  Inside a node the eager protocol measured no slower.
    // So a job that spans nodes sends eagerly, unless the user set
    // UCX_RNDV_THRESH.
    UcxProtocol protocol;
    protocol.eager_only = spans && !getenv("UCX_RNDV_THRESH") && !getenv("NEXAR_UCX_RNDV_THRESH");
    // One worker for the whole process, whatever the number of
    // communicators (their tags tell them apart, runtime/comm_context.h):
    // under MPI_THREAD_MULTIPLE several threads may drive rings on it at
    // once, otherwise one at a time.  Creating it proves that UCX can start
    // here (it needs transports).
    // nexar's progress thread (call/nonblocking.h) drives nonblocking rings
    // on it while the application's thread runs blocking ones.
    std::string error;
    const bool threads = multi_thread_ || (config_.nonblocking && config_.progress == ProgressMode::thread);
    Status s = UcxContext::create(threads, &ucx_, &error, protocol);
    if (ok(s)) s = UcxWorker::create(*ucx_, threads ? UcxThreads::multi : UcxThreads::serialized, &worker_, &error);
    if (ok(s)) {
        ucx_cuda_ = ucx_moves(*ucx_, NEXAR_UCX_MEMORY_CUDA);
        NEXAR_INFO("UCX %s up from %s (%s, %s CUDA memory%s)", ucx_library().version.c_str(),
                   ucx_library().path.c_str(),
                   multi_thread_ ? "MPI_THREAD_MULTIPLE" : threads ? "with nexar's progress thread" : "single thread",
                   ucx_cuda_ ? "moves" : "does not move",
                   protocol.eager_only ? ", eager protocol: the job spans nodes" : "");
        return;
    }
    worker_.reset();
    ucx_.reset();
    // Inside a node nothing is lost: shared memory carries every hop.
    const std::string what = ucx_library().loaded ? "UCX could not start (" + error + ")" : error;
    if (spans && config_.net == NetSetting::ucx)
        NEXAR_WARN("%s: calls whose ring crosses nodes pass through to MPI (NEXAR_NET=ucx); inside a node nexar "
                   "runs on shared memory", what.c_str());
    else if (spans)
        NEXAR_INFO("%s: across nodes nexar takes the MPI's point-to-point, inside a node shared memory", what.c_str());
    else
        NEXAR_INFO("%s: not needed on one node, nexar runs on shared memory", what.c_str());
}

void Runtime::start_device() {
    mpi_cuda_aware_ = nexar::mpi_cuda_aware();
    std::string why;
    if (!ok(load_device_api(&device_api_, &why))) {
        device_api_ = nullptr;
        // A driver without the plugin is worth a warning: the user has a
        // GPU and probably expects nexar to use it.
        if (why.find("no CUDA driver") == 0)
            NEXAR_INFO("device buffers: %s", why.c_str());
        else
            NEXAR_WARN("device buffers pass through to MPI: %s", why.c_str());
    }
    // Whether UCX moves the device's memory itself (the direct path): CUDA
    // memory over a CUDA-aware UCX, or the emulated GPU's standing in for one.
    if (device_api_ && ucx_) {
        const int wire = device_api_->ucx_memory_type;
        ucx_moves_device_ = ucx_moves(*ucx_, wire);
        // (Only a type UCX moves is ever handed to it: the direct path.)
        if (ucx_moves_device_) device_wire_ = wire;
    }
    DeviceEngine::Mode mode;
    const char* path = nullptr;
    bool direct = false;
    if (device_api_ && config_.net == NetSetting::mpi) {  // the MPI moves them between ranks (call/call_plan.cc)
        if (!choose_device_path(config_.cuda_path, mpi_cuda_aware_, &direct))
            NEXAR_WARN("NEXAR_CUDA_PATH=direct, but the MPI does not take device memory; device buffers pass "
                       "through to MPI");
        else
            NEXAR_INFO("device buffers: %s path", path = direct ? "direct (CUDA-aware MPI)" : device_path_name(false));
    } else if (device_api_ && !device_path(&mode)) {
        NEXAR_WARN("NEXAR_CUDA_PATH=direct, but this UCX cannot move CUDA memory; device buffers pass through to MPI");
    } else if (device_api_) {
        NEXAR_INFO("device buffers: %s path", path = device_path_name(mode == DeviceEngine::Mode::direct));
    }
    int mine = device_api_ ? 1 : 0, any = 0;
    pmpi::allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    device_possible_ = any != 0;
    if (device_possible_ && world_rank_ == 0)
        NEXAR_INFO("a job with a GPU: %s",
                   describe_gpu_job(config_, path ? path : "none on rank 0", mpi_cuda_aware_ ? 1 : 0).c_str());
    const std::string note = config_.learn ? " (nonblocking calls from " + format_bytes(kAutoNonblockingBytes) + ")" : "";
    NEXAR_INFO("threshold: %s%s%s; host buffers %s", config_.learn ? "learnt per communicator and size from " : "",
               format_bytes(config_.threshold_bytes).c_str(), note.c_str(),
               config_.host_buffers ? "take the ring" : "pass through");
}

bool Runtime::device_path(DeviceEngine::Mode* mode) const {
    if (!device_api_) return false;
    bool direct = false;
    if (!choose_device_path(config_.cuda_path, ucx_moves_device_, &direct)) return false;
    *mode = direct ? DeviceEngine::Mode::direct : DeviceEngine::Mode::staged;
    return true;
}

int Runtime::on_self_delete(MPI_Comm, int, void*, void*) {
    Runtime::stop();
    return MPI_SUCCESS;
}

int Runtime::on_comm_delete(MPI_Comm, int, void* attr, void*) {
    Runtime* rt = get();
    if (rt) rt->forget(static_cast<CommContext*>(attr));
    return MPI_SUCCESS;
}

// NEXAR_LOG=info, once per communicator, as it goes: where each
// collective's crossover landed (the learner's verdicts are alike on every
// rank: its rank 0 says them).
void Runtime::say_what_was_learnt(const CommContext& ctx) const {
    if (!config_.learn || ctx.rank() != 0 || int(log_level()) < int(LogLevel::info)) return;
    static const char* const names[] = {"MPI_Allreduce", "MPI_Reduce_scatter", "MPI_Allgather"};
    for (int k = 0; k < kCollectives; ++k)
        for (bool in_place : {false, true})
            for (LearnMemory memory : {LearnMemory::host, LearnMemory::device}) {
                const std::string learnt = ctx.learner().describe(LearnShape{Collective(k), in_place, memory});
                if (!learnt.empty())
                    NEXAR_INFO("communicator context %u (%d ranks): %s %s on %s buffers took %s", ctx.id(), ctx.size(),
                               names[k], in_place ? "in place" : "out of place", learn_memory_name(memory),
                               learnt.c_str());
            }
}

void Runtime::forget(CommContext* ctx) {
    {
        std::lock_guard<std::mutex> reg(registry_mutex_);
        if (!registry_.erase(ctx)) return;
    }
    context_generation_.fetch_add(1, std::memory_order_acq_rel);
    say_what_was_learnt(*ctx);
    // MPI_Comm_free lets pending calls complete: nexar's nonblocking ones
    // on it complete before their context goes.
    if (g_in_flight.drain) g_in_flight.drain(ctx);
    // A persistent request made on it outlives the communicator (MPI keeps
    // what a request needs): the context goes with the last one.
    if (ctx->nonblocking_calls.load() > 0) {
        std::lock_guard<std::mutex> reg(registry_mutex_);
        orphans_.insert(ctx);
        return;
    }
    retire(ctx);
}

void Runtime::release_orphan(CommContext* ctx) {
    {
        std::lock_guard<std::mutex> reg(registry_mutex_);
        if (!orphans_.erase(ctx)) return;
    }
    retire(ctx);
}

void Runtime::retire(CommContext* ctx) {
    // A failed ring may have left messages in flight towards this id: it is
    // not handed out again.
    if (!ctx->failed()) release_tag_id(ctx->id());
    // Freed with its communicator (MPI_Finalize frees what is left).
    MPI_Comm shadow = ctx->shadow_comm(), net = ctx->net_comm();
    if (shadow != MPI_COMM_NULL && !g_stopped.load()) PMPI_Comm_free(&shadow);
    if (net != MPI_COMM_NULL && !g_stopped.load()) PMPI_Comm_free(&net);
    delete ctx;  // closes its endpoints
}

void Runtime::reconnect_shm(CommContext& ctx) {
    ctx.release_inboxes();
    bool local_ring = connect_shm(ctx, ctx.shm_for_hier());  // agreed by every rank
    if (!local_ring) ctx.disable_hier();
    ctx.drop_unused_inboxes();
    keep_inboxes_within_budget(&ctx);
}

void Runtime::keep_inboxes_within_budget(CommContext* keep) {
    std::lock_guard<std::mutex> reg(registry_mutex_);
    size_t total = 0;
    for (CommContext* c : registry_) total += c->inbox_bytes();
    if (keep) total += registry_.count(keep) ? 0 : keep->inbox_bytes();  // not registered yet
    if (total <= kInboxBudgetBytes) return;
    // A context that alone takes half the budget would only push the others
    // out in turn: it goes over the budget instead.
    if (keep && keep->inbox_bytes() > kInboxBudgetBytes / 2) return;
    // Least recently used first, never one in a call (on another thread),
    // down to three quarters of the budget so that the next set-up does not
    // release another one at once.
    std::vector<CommContext*> idle;
    for (CommContext* c : registry_)
        if (c != keep && c->inbox_bytes()) idle.push_back(c);
    std::sort(idle.begin(), idle.end(),
              [](CommContext* a, CommContext* b) { return a->last_used.load() < b->last_used.load(); });
    for (CommContext* victim : idle) {
        if (total <= kInboxBudgetBytes / 4 * 3) break;
        std::unique_lock<std::mutex> busy(victim->call_mutex(), std::try_to_lock);
        if (!busy.owns_lock() || victim->nonblocking_calls.load() > 0) continue;
        total -= victim->inbox_bytes();
        victim->release_inboxes();
        NEXAR_DEBUG("communicator context %u: shared-memory inboxes released (budget %s)", victim->id(),
                    format_bytes(kInboxBudgetBytes).c_str());
    }
}

void Runtime::touch(CommContext& ctx) { ctx.last_used.store(++calls_); }

Status Runtime::endpoints_to(const std::vector<uint8_t>& addresses, const std::vector<int>& lens,
                             const std::vector<int>& displs, int next, int prev, CommContext::Peer* to_next,
                             CommContext::Peer* to_prev, std::string* error) {
    for (int r : {next, prev})
        if (lens[size_t(r)] <= 0) {
            *error = "a ring neighbour has no UCX worker";
            return Status::unavailable;
        }
    auto address = [&](int r) {
        const uint8_t* a = &addresses[size_t(displs[size_t(r)])];
        return std::vector<uint8_t>(a, a + lens[size_t(r)]);
    };
    to_next->address = address(next);
    to_prev->address = address(prev);
    Status s = endpoint_to(to_next->address, &to_next->ep, error);
    if (ok(s)) s = endpoint_to(to_prev->address, &to_prev->ep, error);
    return s;
}

Status Runtime::refresh_endpoints(CommContext& ctx, std::string* error) {
    for (size_t i = 0; CommContext::Peer* p = ctx.peers_for_refresh(i); ++i) {
        if (p->usable()) continue;
        Status s = endpoint_to(p->address, &p->ep, error);
        if (!ok(s)) return s;
        NEXAR_DEBUG("communicator context %u: a closed endpoint replaced", ctx.id());
    }
    return Status::ok;
}

Status Runtime::endpoint_to(const std::vector<uint8_t>& address, std::shared_ptr<UcxEndpoint>* out,
                            std::string* error) {
    std::lock_guard<std::mutex> lock(endpoints_mutex_);
    auto it = endpoints_.find(address);
    // One that failed or was closed after a failure is replaced; the
    // contexts that hold it keep it (and fail on it).
    if (it != endpoints_.end() && it->second->usable()) {
        *out = it->second;
        return Status::ok;
    }
    std::unique_ptr<UcxEndpoint> ep;
    Status s = UcxEndpoint::create(*worker_, address.data(), address.size(), &ep, error);
    if (!ok(s)) return s;
    std::shared_ptr<UcxEndpoint> shared(std::move(ep));
    endpoints_[address] = shared;
    *out = std::move(shared);
    return Status::ok;
}

uint32_t Runtime::allocate_tag_id() {
    std::lock_guard<std::mutex> lock(tag_ids_mutex_);
    const size_t n = size_t(1) << kTagContextBits;
    if (tag_ids_in_use_.empty()) tag_ids_in_use_.assign(n, false);
    // The next free id after the last one handed out (0 is never one): an
    // id comes back only after all the others, long after any message of
    // its old communicator.
    for (size_t i = 0; i < n - 1; ++i) {
        size_t id = 1 + (last_tag_id_ + i) % (n - 1);
        if (!tag_ids_in_use_[id]) {
            tag_ids_in_use_[id] = true;
            last_tag_id_ = id;
            return uint32_t(id);
        }
    }
    return 0;
}

void Runtime::release_tag_id(uint32_t id) {
    std::lock_guard<std::mutex> lock(tag_ids_mutex_);
    if (id < tag_ids_in_use_.size()) tag_ids_in_use_[id] = false;
}

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
// whether every rank mapped its local successor's inbox.  Collective.
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
        every_local_hop = every_local_hop && opened_by_rank[size_t(r)];
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
// two slots that only it writes (the one-shot publishes a call's sequence
// number in its `produced` counter), and maps every other rank's.  Ready
// on every rank or on none.  Collective.
void Runtime::connect_boards(CommContext& ctx) {
    // Alike on every rank: rank 0's settings and the communicator's shape.
    if (config_.one_shot_bytes == 0 || ctx.topology().nodes() != 1 || ctx.size() > int(kMaxOneShotRanks)) return;
    // A call takes the one-shot where its vector x (ranks - 1) is at most
    // one_shot_bytes (call/collective_task.cc): its slots need no more.
    const size_t largest = size_t(config_.one_shot_bytes) / size_t(ctx.size() - 1);
    const size_t slot_bytes = (largest + 63) & ~size_t(63);
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
        v.published = &b->produced();
        v.slots[0] = b->slot(0);
        v.slots[1] = b->slot(1);
        v.slot_bytes = b->slot_bytes();
        views.push_back(v);
    }
    ctx.set_boards(std::move(boards), std::move(views));
    NEXAR_INFO("communicator context %u: allreduces up to %s take the one-shot allreduce", ctx.id(),
               format_bytes(largest).c_str());
}

namespace {

// The cost probe's rings (decide/cost_probe.h) on a context's links.
class ContextInterRings final : public InterRingProbe {
public:
    ContextInterRings(CommContext& ctx, CommContext::Net net) : ctx_(ctx), net_(net) {}
    MPI_Comm comm() const override { return ctx_.comm(); }
    int nodes() const override { return ctx_.topology().nodes(); }
    int local_size() const override { return ctx_.topology().local_size(ctx_.rank()); }
    Status reserve(size_t count, const RingOptions& opt) override {
        return ctx_.scratch().reserve(ring_slot_bytes(count, nodes(), sizeof(float), opt.segment_bytes), opt.depth);
    }
    Status run(float* buf, size_t count, const RingOptions& opt, std::string* error) override {
        return run_inter_ring(ctx_, net_, ctx_.next_sequence(), buf, count, DataType::f32, ReduceOp::sum, opt,
                              error);
    }

private:
    CommContext& ctx_;
    CommContext::Net net_;
};

// The flat ring as the probe's rings over one network: n = the
// communicator's ranks as "nodes" of one rank, so that the fit is the flat
// ring's 2(n-1) steps of 2(n-1)/n of the bytes (channel_ring_seconds).
class FlatRings final : public InterRingProbe {
public:
    FlatRings(CommContext& ctx, CommContext::Net net) : ctx_(ctx), net_(net) {}
    MPI_Comm comm() const override { return ctx_.comm(); }
    int nodes() const override { return ctx_.size(); }
    int local_size() const override { return 1; }
    Status reserve(size_t count, const RingOptions& opt) override {
        return ctx_.scratch().reserve(ring_slot_bytes(count, ctx_.size(), sizeof(float), opt.segment_bytes),
                                      opt.depth);
    }
    Status run(float* buf, size_t count, const RingOptions& opt, std::string* error) override {
        return run_flat_ring(ctx_, net_, ctx_.next_sequence(), buf, count, opt, error);
    }

private:
    CommContext& ctx_;
    CommContext::Net net_;
};

// The options of the rings across nodes over network `net` (the probe's
// as the calls': call/call_plan.h, network_segment).
RingOptions inter_ring_options(const Config& cfg, CommContext::Net net) {
    RingOptions opt;
    opt.segment_bytes = net == CommContext::Net::mpi ? cfg.mpi_segment_bytes() : cfg.ucx_segment_bytes();
    opt.depth = cfg.pipeline_depth;
    opt.timeout_s = cfg.timeout_s;
    return opt;
}

}  // namespace

// The hierarchical allreduce needs nodes of equal size with company, the
// node rings in shared memory and endpoints to the same local index on the
// neighbouring nodes, on every rank; NEXAR_ALGORITHM=auto then times the
// channels (decide/cost_probe.h).  Collective.
void Runtime::setup_hierarchical(CommContext& ctx, const std::vector<uint8_t>& addresses,
                                 const std::vector<int>& lens, const std::vector<int>& displs) {
    const RingTopology& topo = ctx.topology();
    const int me = ctx.rank();
    std::string error;
    Status s = Status::ok;
    if (ctx.network() == CommContext::Net::ucx) {  // the MPI's point-to-point needs no endpoint
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
        ContextInterRings rings(ctx, ctx.network());
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
    const int P = topo.nodes(), L = topo.local_size(me);
    // The choice at a few sizes, for the log.
    std::string when;
    for (uint64_t mib : {1, 8, 64, 512}) {
        if (!when.empty()) when += ", ";
        const size_t bytes = size_t(mib << 20);
        const bool mpi = ctx.network_for(bytes) == CommContext::Net::mpi;
        bool hier = ctx.hierarchical_is_faster(bytes, mpi ? config_.mpi_segment_bytes() : config_.ucx_segment_bytes());
        when += format_bytes(mib << 20) + (hier ? " hier" : " ring");
    }
    NEXAR_INFO("communicator context %u: %d nodes x %d ranks; hierarchical allreduce ready; cost model (%s): "
               "shm alpha=%.1fus beta=%.2fGB/s, network alpha=%.1fus beta=%.3fGB/s per node; "
               "NEXAR_ALGORITHM=auto picks: %s",
               ctx.id(), P, L, measured ? "measured" : "defaults", model.shm.alpha_s * 1e6,
               model.shm.bytes_per_s / 1e9, model.net.alpha_s * 1e6, model.net.bytes_per_s / 1e9, when.c_str());
}

bool Runtime::has_context(MPI_Comm comm) const {
    void* value = nullptr;
    int found = 0;
    return comm_keyval_ != MPI_KEYVAL_INVALID && PMPI_Comm_get_attr(comm, comm_keyval_, &value, &found) == MPI_SUCCESS &&
           found;
}

void Runtime::say_once_no_context() {
    static std::atomic<bool> said{false};
    if (!said.exchange(true))
        NEXAR_INFO("a nonblocking collective on a communicator without a ring of nexar's passes through to MPI "
                   "(setting the ring up would wait for the other ranks): rings are set up at MPI_Init for "
                   "MPI_COMM_WORLD, when a communicator is made (MPI_Comm_dup, _split, _create, a topology: not "
                   "MPI_Comm_idup), and "
                   "by its first blocking collective that takes the ring");
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
    FlatRings over_ucx(ctx, CommContext::Net::ucx), over_mpi(ctx, CommContext::Net::mpi);
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
        when += format_bytes(bytes) + (ctx.network_for(size_t(bytes)) == CommContext::Net::mpi ? " mpi" : " ucx");
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
            bool for_hier = ctx->network_ready() && t.nodes() >= 2 && t.uniform() && t.max_ranks_per_node() >= 2 &&
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
