#include "runtime/runtime.h"

#include <mpi.h>
#include <sched.h>

#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "base/log.h"
#include "memory/device.h"
#include "mpi/mpi_family.h"
#include "mpi/pmpi.h"
#include "nexar/nexar.h"
#include "reduce/mpi_types.h"
#include "runtime/job_report.h"
#include "runtime/stats.h"
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
    choose_idle_yield();
    // NEXAR_NET=mpi: no hop takes UCX, so none is started (a UCX that
    // misbehaves on this fabric is never touched).
    if (config_.net == NetSetting::mpi)
        NEXAR_INFO("NEXAR_NET=mpi: UCX is not started; hops off shared memory take the MPI's point-to-point");
    else
        start_ucx(spans);
    start_device();
}

namespace {

// The running kernel's identity (a boot's random id): processes in
// different network namespaces on one machine, as the simulated nodes of
// test/cluster/ are, share it, and share its CPUs.  0 where unknown.
int kernel_color() {
    FILE* f = fopen("/proc/sys/kernel/random/boot_id", "r");
    if (!f) return 0;
    char id[64] = {};
    const bool got = fgets(id, sizeof id, f) != nullptr;
    fclose(f);
    uint32_t h = 2166136261u;
    for (const char* c = id; got && *c && *c != '\n'; ++c) h = (h ^ uint8_t(*c)) * 16777619u;
    return got ? int(h & 0x7fffffff) : 0;
}

}  // namespace

// How idle waits give their core away (NEXAR_YIELD): often only where this
// machine runs more of the job's ranks than the CPUs they may run on (the
// union of their affinity masks), as MPIs yield when oversubscribed.
// Collective.
void Runtime::choose_idle_yield() const {
    MPI_Comm machine = MPI_COMM_NULL;
    int ranks = 0, my_index = 0, all_known = 0;
    cpu_set_t cpus;
    CPU_ZERO(&cpus);
    all_known = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? 1 : 0;
    if (pmpi::comm_split(MPI_COMM_WORLD, kernel_color(), world_rank_, &machine) == MPI_SUCCESS &&
        machine != MPI_COMM_NULL) {
        PMPI_Comm_size(machine, &ranks);
        PMPI_Comm_rank(machine, &my_index);
        pmpi::allreduce(MPI_IN_PLACE, &cpus, int(sizeof cpus), MPI_BYTE, MPI_BOR, machine);
        pmpi::allreduce(MPI_IN_PLACE, &all_known, 1, MPI_INT, MPI_MIN, machine);
        PMPI_Comm_free(&machine);
    } else {
        all_known = 0;
    }
    const int machine_cpus = all_known ? CPU_COUNT(&cpus) : 0;
    const bool oversubscribed = machine_cpus > 0 && ranks > machine_cpus;
    const bool often = config_.yield == YieldSetting::on || (config_.yield == YieldSetting::automatic && oversubscribed);
    set_idle_yield(often);
    if (my_index == 0)
        NEXAR_INFO("%d of the job's ranks on this machine, on %d CPUs: waits %s (NEXAR_YIELD=%s)", ranks, machine_cpus,
                   often ? "give the core away every 64 idle polls"
                         : "keep their core (a yield would give it to another process, not to a peer)",
                   auto_bool_name(config_.yield));
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
    const bool over_mpi = config_.net == NetSetting::mpi;  // NEXAR_NET=mpi: the MPI moves them between ranks
    if (device_api_ && !device_path(over_mpi, &mode))
        NEXAR_WARN("NEXAR_CUDA_PATH=direct, but %s; device buffers pass through to MPI",
                   over_mpi ? "the MPI does not take device memory" : "this UCX cannot move CUDA memory");
    else if (device_api_)
        NEXAR_INFO("device buffers: %s path",
                   path = device_path_name(mode == DeviceEngine::Mode::direct, over_mpi));
    int mine = device_api_ ? 1 : 0, any = 0;
    pmpi::allreduce(&mine, &any, 1, MPI_INT, MPI_MAX, MPI_COMM_WORLD);
    device_possible_ = any != 0;
    if (device_possible_ && world_rank_ == 0)
        NEXAR_INFO("a job with a GPU: %s",
                   describe_gpu_job(config_, path ? path : "none on rank 0", mpi_cuda_aware_ ? 1 : 0).c_str());
    const std::string threshold =
        config_.learn ? "learnt per communicator and size: " + learnt_sizes(config_) +
                            " (nonblocking and persistent calls from " + format_bytes(kAutoNonblockingBytes) +
                            "; their allreduces on one node from any size as the one-shot)"
                      : "from " + format_bytes(config_.threshold_bytes);
    NEXAR_INFO("threshold: %s; host buffers %s", threshold.c_str(),
               config_.host_buffers ? "take the ring" : "pass through");
}

bool Runtime::device_path(bool over_mpi, DeviceEngine::Mode* mode) const {
    if (!device_api_) return false;
    bool direct = false;
    if (!choose_device_path(config_.cuda_path, over_mpi ? mpi_cuda_aware_ : ucx_moves_device_, &direct))
        return false;
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
    Status s = endpoint_of(addresses, lens, displs, next, to_next, error);
    if (ok(s)) s = endpoint_of(addresses, lens, displs, prev, to_prev, error);
    return s;
}

Status Runtime::endpoint_of(const std::vector<uint8_t>& addresses, const std::vector<int>& lens,
                            const std::vector<int>& displs, int r, CommContext::Peer* to, std::string* error) {
    if (lens[size_t(r)] <= 0) {
        *error = "rank " + std::to_string(r) + " has no UCX worker";
        return Status::unavailable;
    }
    const uint8_t* a = &addresses[size_t(displs[size_t(r)])];
    to->address.assign(a, a + lens[size_t(r)]);
    return endpoint_to(to->address, &to->ep, error);
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

}  // namespace nexar

