// Nonblocking collectives in flight (call/nonblocking.h).
#include "call/nonblocking.h"

#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <array>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <vector>

#include "algo/tag.h"
#include "base/log.h"
#include "call/collective_task.h"
#include "call/mpi_staging.h"
#include "call/pass_through.h"
#include "mpi/pmpi.h"
#include "runtime/runtime.h"
#include "runtime/stats.h"
#include "transport/ucx_exchange.h"

namespace nexar {

namespace {

// Idle rounds between a nonblocking call's looks at the clock for a stall
// check (at most one per kStallCheckInterval, algo/ring.h): its rounds may
// be the progress thread's, each after a nap of up to kLongNapUs (below),
// so the blocking loops' kIdleSpinsBetweenChecks would look only every
// quarter second.  Every 64 naps is every 13-16 ms.
constexpr unsigned kEngineRoundsBetweenChecks = 64;

// The derived datatypes of a call whose fallback may be posted later than
// the call was made (after the agreement), by when MPI lets the
// application have freed them: the call holds duplicates of its own, from
// its start until it completes.  (Only the allgather's can reach the
// agreement: the other collectives' ring takes predefined types alone, and
// a call with any other passes through at its start.)  Released inside an
// MPI call: the engine completes calls only there.
class HeldTypes {
public:
    HeldTypes() = default;
    HeldTypes(const HeldTypes&) = delete;
    HeldTypes& operator=(const HeldTypes&) = delete;
    ~HeldTypes() { release(); }
    // Replaces *type with a duplicate where it is derived.
    void hold(MPI_Datatype* type) {
        int ints = 0, addresses = 0, types = 0, combiner = MPI_COMBINER_NAMED;
        if (*type == MPI_DATATYPE_NULL || n_ == kMax ||
            PMPI_Type_get_envelope(*type, &ints, &addresses, &types, &combiner) != MPI_SUCCESS ||
            combiner == MPI_COMBINER_NAMED)
            return;
        MPI_Datatype dup = MPI_DATATYPE_NULL;
        if (PMPI_Type_dup(*type, &dup) != MPI_SUCCESS) return;  // the call keeps the application's
        *type = held_[n_++] = dup;
    }
    void release() {
        while (n_ > 0) PMPI_Type_free(&held_[--n_]);
    }

private:
    static constexpr int kMax = 2;
    MPI_Datatype held_[kMax] = {MPI_DATATYPE_NULL, MPI_DATATYPE_NULL};
    int n_ = 0;
};

// An allgather's call with its derived types held (HeldTypes).
CollectiveCall holding_types(const CollectiveCall& given, HeldTypes& held) {
    CollectiveCall call = given;
    if (call.kind != Collective::allgather) return call;
    held.hold(&call.datatype);
    if (given.sendbuf == MPI_IN_PLACE)  // sendtype is ignored, and may be anything
        return call;
    if (given.sendtype == given.datatype)
        call.sendtype = call.datatype;
    else
        held.hold(&call.sendtype);
    return call;
}

// One nonblocking call: its task and where it stands.
struct NonblockingCall {
    enum class Stage {
        agreeing,  // the agreement is in flight (over UCX, or a PMPI_Iallreduce)
        decided,   // agreed: waits for its turn on the context (or to post its fallback)
        running,   // its ring runs
        ran,       // its ring ended: finish() is next
        inner,     // its PMPI_I* (a fallback) is in flight
        complete,  // result is final; the request is completed next, in an MPI call
    };
    // hold_types: a nonblocking call's (a persistent one's fallback is the
    // MPI's own persistent call, made at its initialization).
    NonblockingCall(Runtime& rt, const CollectiveCall& call, bool hold_types)
        : task(rt, hold_types ? holding_types(call, held_types) : call, true) {}

    HeldTypes held_types;  // before the task: it is made with them
    CollectiveTask task;
    CommContext* ctx = nullptr;
    Stage stage = Stage::agreeing;
    TaskStep next = TaskStep::agree;           // once decided: run, fall_back or done
    std::optional<UcxRingExchange> exchange;   // the agreement over UCX
    MPI_Request agreement = MPI_REQUEST_NULL;  // ... or over MPI (communicators too large for it)
    MPI_Request inner = MPI_REQUEST_NULL;
    // The inner call's device buffers in host memory (an MPI that does not
    // know CUDA), copied back when it completes.
    std::unique_ptr<MpiStaging> staging;  // (a persistent call keeps it from start to start)
    bool staged = false;                  // the inner call in flight is on it
    bool device = false;                  // its ring runs on device buffers (GPU work in its steps)...
    int device_id = 0;                    // ...on this GPU, selected before each of its steps
    MPI_Request request = MPI_REQUEST_NULL;  // the application's (generalized)
    Status run_status = Status::ok;
    int result = MPI_SUCCESS;
    bool raise = false;  // the error goes to the communicator's handler at completion
    // Its ring's stall check, every kEngineRoundsBetweenChecks idle rounds.
    IdleBackoff idle{kEngineRoundsBetweenChecks};
    // A persistent call (MPI_Allreduce_init ...): planned and agreed once;
    // `request` is its carrier (see persistent calls, below).
    bool persistent = false;
    // ...that nexar does not run, in a job whose device buffers must not
    // reach the MPI: each start posts the MPI's nonblocking call (staged
    // where this rank's buffers are device memory) in place of the MPI's
    // own persistent one.  ctx null: posted at once, on the application's
    // communicator; else its fallback, in the engine's order.
    bool mpi_each_start = false;
    int carrier_tag = 0;
    // A persistent call's failure, until a completion call has reported it.
    std::atomic<int> unreported_error{MPI_SUCCESS};
};
using CallPtr = std::shared_ptr<NonblockingCall>;

// The generalized request's callbacks.  extra_state is a CallPtr of its own,
// so the call outlives both the engine's list and the request.
int query_grequest(void* extra, MPI_Status* status) {
    const NonblockingCall& c = **static_cast<CallPtr*>(extra);
    PMPI_Status_set_elements(status, MPI_BYTE, 0);
    PMPI_Status_set_cancelled(status, 0);
    status->MPI_SOURCE = MPI_UNDEFINED;
    status->MPI_TAG = MPI_UNDEFINED;
    status->MPI_ERROR = c.result;
    return c.result;
}
int free_grequest(void* extra) {
    delete static_cast<CallPtr*>(extra);
    return MPI_SUCCESS;
}
int cancel_grequest(void*, int) { return MPI_SUCCESS; }  // a started collective cannot be cancelled

// Persistent calls' requests are carriers: a persistent receive of 0 bytes
// from this process itself, on nexar's own duplicate of MPI_COMM_SELF, with
// a tag of the call's own.  A real persistent request of the MPI's: every
// completion call takes it, and leaves it inactive and valid for the next
// MPI_Start.  MPI_Start starts it with the call; the call completes it with
// an empty message to itself, also when the call failed: nexar's completion
// calls then give the call's error in the carrier's place
// (take_persistent_error), which also went to the communicator's handler.
// (Completing the carrier with an error of MPI's own, say a message too long
// for it, fares badly: Open MPI's MPI_Wait then sets a persistent request
// to MPI_REQUEST_NULL, and its MPI_Waitall returns MPI_SUCCESS.)
MPI_Comm carrier_comm() {
    static MPI_Comm comm = [] {
        MPI_Comm c = MPI_COMM_NULL;
        pmpi::comm_dup(MPI_COMM_SELF, &c);
        PMPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
        return c;
    }();
    return comm;
}

void complete_carrier(int tag) { PMPI_Send(nullptr, 0, MPI_INT, 0, tag, carrier_comm()); }

// Every call in flight, in the order they were started, and the progress
// thread that moves them along while the application computes.
class Engine {
public:
    void add(CallPtr c);
    bool idle() const { return in_flight_.load(std::memory_order_acquire) == 0; }
    // One round over every call.  `may_call_mpi`: the steps that call MPI
    // (the agreement over MPI, fallbacks, completing requests) run too.
    // wait_for_lock: wait for another thread's round rather than skip it
    // (an MPI_Test must see what that round finished).
    bool progress(bool may_call_mpi, bool wait_for_lock = false);
    // Moves the calls along until none that `match` is in flight.
    template <class Match>
    void drain(const Match& match) {
        IdleBackoff idle;
        while (!idle_of(match)) idle.after_round(progress(true));
    }
    void stop_thread();
    void wake_thread();

private:
    // Calls in flight whose steps do GPU work: the thread that moves them
    // gets its current GPU back after each round (an application thread's
    // stays the application's).
    std::atomic<int> device_calls_{0};
    template <class Match>
    bool idle_of(const Match& match) {
        std::lock_guard<std::mutex> lock(mutex_);
        for (const CallPtr& c : calls_)
            if (match(*c)) return false;
        return true;
    }
    bool step(NonblockingCall& c, bool earlier_undecided, bool earlier_busy, bool may_call_mpi);
    bool agree_step(NonblockingCall& c, bool may_call_mpi);
    bool run_step(NonblockingCall& c);
    void decide(NonblockingCall& c);
    std::vector<CallPtr> take_finished();
    void complete(std::vector<CallPtr>& done);
    void thread_main();

    std::mutex mutex_;  // the calls, and one round of progress at a time
    std::deque<CallPtr> calls_;
    std::atomic<int> in_flight_{0};

public:
    std::atomic<uint64_t> completions{0};  // requests completed
    std::atomic<int> app_waiters{0};       // application threads in wait_progressing
    // Whether the application's latest wait began right after its latest
    // start (it waits on its calls at once, rather than computing while
    // they run): then a start does not wake a thread in a long doze.
    void note_wait_begins() {
        const int64_t since_start = now_ns() - last_start_ns_.load(std::memory_order_relaxed);
        waits_at_once_.store(since_start < kAtOnceNs, std::memory_order_relaxed);
    }

private:
    // The thread sleeps on wake_ while nothing is in flight, or while an
    // application thread waits in MPI (it moves the calls itself).
    std::mutex wake_mutex_;
    std::condition_variable wake_;
    std::thread thread_;
    bool stopping_ = false;
    bool thread_started_ = false;
    bool deep_asleep_ = false;  // in an untimed wait: add() must wake it
    bool long_doze_ = false;    // in a wait longer than kDoze (thread_main)
    static constexpr int64_t kAtOnceNs = 100000;
    static int64_t now_ns() {
        return std::chrono::duration_cast<std::chrono::nanoseconds>(
                   std::chrono::steady_clock::now().time_since_epoch())
            .count();
    }
    std::atomic<int64_t> last_start_ns_{0};
    std::atomic<bool> waits_at_once_{false};
};

Engine& engine() {
    static Engine* e = new Engine;  // never destroyed: requests may outlive static destructors
    return *e;
}

// The call's PMPI_I* as c's inner request: the MPI's path, safe for every
// memory kind (call/pass_through.h): this rank's device buffers go through
// host memory where the MPI does not know CUDA (finish_inner copies the
// result back).
void post_inner(NonblockingCall& c, const CollectiveCall& call) {
    BufferKinds kinds;
    c.staged = needs_staging(Runtime::get(), call, &kinds);
    if (!c.staged) {
        c.result = post_pmpi_nonblocking(call, &c.inner);
    } else {
        if (!c.staging) c.staging.reset(new MpiStaging);
        CollectiveCall staged;
        std::string error;
        if (ok(c.staging->stage_in(*Runtime::get(), call, kinds, &staged, &error))) {
            c.result = post_pmpi_nonblocking(staged, &c.inner);
        } else {
            NEXAR_ERROR("%s on device memory: %s", call.name, error.c_str());
            c.result = MPI_ERR_OTHER;
            c.raise = true;
        }
    }
    c.stage = c.result == MPI_SUCCESS ? NonblockingCall::Stage::inner : NonblockingCall::Stage::complete;
}

// The inner request completed: a staged result goes back to the device.
void finish_inner(NonblockingCall& c) {
    std::string error;
    if (c.result != MPI_SUCCESS || !c.staged || ok(c.staging->stage_out(*Runtime::get(), c.task.call(), &error)))
        return;
    NEXAR_ERROR("%s on device memory: %s", c.task.call().name, error.c_str());
    c.result = MPI_ERR_OTHER;
    c.raise = true;
}

// The call itself on the context's duplicate communicator (a call without
// a context, persistent: on its own).
void post_fall_back(NonblockingCall& c) {
    CollectiveCall call = c.task.call();
    if (c.ctx) call.comm = c.ctx->shadow_comm();
    (c.ctx ? process_stats().fallback_calls : process_stats().passthrough_calls).fetch_add(1, std::memory_order_relaxed);
    post_inner(c, call);
    if (c.stage == NonblockingCall::Stage::inner)
        report_mpi_call(call, c.persistent ? CallMode::persistent : CallMode::nonblocking);
}

void pause_us(long us) {
    timespec t{0, us * 1000};
    nanosleep(&t, nullptr);
}

}  // namespace

void Engine::add(CallPtr c) {
    if (c->device) device_calls_.fetch_add(1, std::memory_order_relaxed);
    {
        std::lock_guard<std::mutex> lock(mutex_);
        calls_.push_back(std::move(c));
        in_flight_.fetch_add(1, std::memory_order_release);
    }
    const Runtime* rt = Runtime::get();
    if (!rt || rt->config().progress != ProgressMode::thread) return;
    std::lock_guard<std::mutex> lock(wake_mutex_);
    if (!thread_started_ && !stopping_) {
        thread_started_ = true;
        thread_ = std::thread([this] { thread_main(); });
    }
    // A thread dozing (thread_main) looks again within its doze by itself:
    // no system call per call for a program that starts calls in a loop.
    // A long doze is cut short, unless the application waits on its calls
    // at once (it moves them itself, and a wake-up per call costs more
    // than a small call).
    last_start_ns_.store(now_ns(), std::memory_order_relaxed);
    if (deep_asleep_ || (long_doze_ && !waits_at_once_.load(std::memory_order_relaxed))) wake_.notify_one();
}

// After the agreement: what every rank does with the call (the same on all).
void Engine::decide(NonblockingCall& c) {
    c.next = c.task.agreed();  // never agree: a nonblocking task falls back instead
    if (c.next == TaskStep::done) {
        c.result = c.task.result();
        c.raise = true;
        c.stage = NonblockingCall::Stage::complete;
        return;
    }
    c.stage = NonblockingCall::Stage::decided;
}

bool Engine::agree_step(NonblockingCall& c, bool may_call_mpi) {
    using Stage = NonblockingCall::Stage;
    if (c.exchange) {
        bool moved = false;
        Status s = c.exchange->poll(&moved, c.task.error());
        if (!ok(s)) {
            NEXAR_ERROR("%s on communicator context %u: %s", c.task.call().name, c.ctx->id(), c.task.error()->c_str());
            c.ctx->mark_failed();
            c.result = MPI_ERR_OTHER;
            c.raise = true;
            c.stage = Stage::complete;
            return true;
        }
        if (c.exchange->finished()) {
            c.exchange.reset();
            decide(c);
            return true;
        }
        return moved;
    }
    if (!may_call_mpi) return false;
    int flag = 0;
    const int rc = pmpi::test(&c.agreement, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) {
        c.result = rc;
        c.stage = Stage::complete;
        return true;
    }
    if (flag) decide(c);
    return flag != 0;
}

bool Engine::run_step(NonblockingCall& c) {
    bool moved = false;
    Status s = c.task.run().poll(&moved, c.task.error());
    if (ok(s) && !c.task.run().finished() && c.idle.after_round(moved))
        s = c.task.run().check_stall(c.idle.idle_since(), c.task.error());
    if (!ok(s) || c.task.run().finished()) {
        c.run_status = s;
        c.stage = NonblockingCall::Stage::ran;
        return true;
    }
    return moved;
}

// One round of one call.  earlier_undecided / earlier_busy: a call started
// before it on the same context is still agreeing / has not finished.
bool Engine::step(NonblockingCall& c, bool earlier_undecided, bool earlier_busy, bool may_call_mpi) {
    using Stage = NonblockingCall::Stage;
    int flag = 0;
    switch (c.stage) {
        case Stage::agreeing:
            // Decisions in start order: fallbacks are posted in it.
            return !earlier_undecided && agree_step(c, may_call_mpi);
        case Stage::decided:
            if (c.next == TaskStep::fall_back) {
                if (!may_call_mpi) return false;
                post_fall_back(c);
                return true;
            }
            if (earlier_busy) return false;
            // Its turn: the context's scratch and ring sequence are free.
            if (c.task.start_run() == TaskStep::run) {
                c.stage = Stage::running;
            } else {
                c.result = c.task.result();
                c.raise = true;
                c.stage = Stage::complete;
            }
            return true;
        case Stage::running: return run_step(c);
        case Stage::ran:
            c.result = c.task.finish(c.run_status);
            c.raise = c.result != MPI_SUCCESS;
            c.stage = Stage::complete;
            return true;
        case Stage::inner: {
            if (!may_call_mpi) return false;
            const int rc = pmpi::test(&c.inner, &flag, MPI_STATUS_IGNORE);
            if (rc != MPI_SUCCESS) c.result = rc;  // MPI called the handler
            if (!flag && rc == MPI_SUCCESS) return false;
            finish_inner(c);
            c.stage = Stage::complete;
            return true;
        }
        case Stage::complete: return false;
    }
    return false;
}

// Takes the calls that are over out of the list, in start order.
std::vector<CallPtr> Engine::take_finished() {
    std::vector<CallPtr> done;
    for (auto it = calls_.begin(); it != calls_.end();) {
        if ((*it)->stage != NonblockingCall::Stage::complete) {
            ++it;
            continue;
        }
        done.push_back(std::move(*it));
        it = calls_.erase(it);
    }
    return done;
}

// Completes their requests, outside the engine's lock: an error handler
// may call MPI, and nexar, again.
void Engine::complete(std::vector<CallPtr>& done) {
    for (CallPtr& call : done) {
        NonblockingCall& c = *call;
        if (c.raise) raise_mpi_error(c.task.call().comm, c.result);
        if (c.ctx) c.ctx->nonblocking_calls.fetch_sub(1, std::memory_order_relaxed);
        c.held_types.release();  // before the request completes: the application may then finalize
        if (c.persistent) {
            c.unreported_error.store(c.result, std::memory_order_release);
            complete_carrier(c.carrier_tag);
        } else {
            PMPI_Grequest_complete(c.request);
        }
        if (c.device) device_calls_.fetch_sub(1, std::memory_order_relaxed);
        in_flight_.fetch_sub(1, std::memory_order_release);
        completions.fetch_add(1, std::memory_order_release);
    }
}

bool Engine::progress(bool may_call_mpi, bool wait_for_lock) {
    using Stage = NonblockingCall::Stage;
    if (idle()) return false;
    std::unique_lock<std::mutex> lock(mutex_, std::defer_lock);
    if (wait_for_lock)
        lock.lock();
    else if (!lock.try_lock())
        return false;  // another thread is at it
    // A device call's steps run on its buffers' GPU, which need not be
    // this thread's current one (nexar's own thread starts on GPU 0; a
    // rank of a node with a GPU per rank uses its own): selected before
    // each step, and the thread's own given back after the round.
    std::optional<CurrentDeviceGuard> keep_device;
    const nexar_device_api* api = nullptr;
    if (device_calls_.load(std::memory_order_relaxed) > 0)
        if (const Runtime* rt = Runtime::get()) keep_device.emplace(api = rt->device_api());
    // Per context: whether an earlier call is undecided, or not finished.
    // Kept on the stack for the usual few contexts (this runs in every
    // round of every wait); more spill into a vector.
    struct Seen {
        const CommContext* ctx;
        bool undecided, busy;
    };
    std::array<Seen, 16> near{};
    size_t n_near = 0;
    std::vector<Seen> far;
    auto seen_of = [&](const CommContext* ctx) -> Seen& {
        for (size_t i = 0; i < n_near; ++i)
            if (near[i].ctx == ctx) return near[i];
        for (Seen& s : far)
            if (s.ctx == ctx) return s;
        if (n_near < near.size()) return near[n_near++] = Seen{ctx, false, false};
        return far.emplace_back(Seen{ctx, false, false});
    };
    bool moved = false;
    for (const CallPtr& c : calls_) {
        Seen& seen = seen_of(c->ctx);
        if (c->device && api) api->set_device(c->device_id);
        moved |= step(*c, seen.undecided, seen.busy, may_call_mpi);
        seen.undecided |= c->stage == Stage::agreeing;
        // A later ring waits only for earlier calls that (may) run a ring on
        // the context: a fallback runs in MPI, on the duplicate.
        seen.busy |= c->stage == Stage::agreeing || c->stage == Stage::running || c->stage == Stage::ran ||
                     (c->stage == Stage::decided && c->next == TaskStep::run);
    }
    if (!may_call_mpi) return moved;
    std::vector<CallPtr> done = take_finished();
    keep_device.reset();  // the error handlers run on the thread's own GPU
    lock.unlock();
    complete(done);
    return moved || !done.empty();
}

// The progress thread: moves the calls along while any is in flight, and
// sleeps when none is.  It calls MPI only where MPI_THREAD_MULTIPLE allows
// it; otherwise the application's next MPI call takes the steps that need
// MPI (the request's completion among them).  While nothing moves it backs
// off: the core it shares with the application's computation.
//
// With nothing for it to do, it dozes: timed waits, for up to kDozeFor
// after it last saw a call in flight, so that a program starting calls one
// after another pays no wake-up (a system call, and a switch on the core
// it shares with the application) per call; then it sleeps until woken.
// Its waits start at kDoze and double, up to kMaxDoze, each time it looks
// and finds an application thread waiting in MPI for the calls in flight
// (that thread moves them itself); they drop back to kDoze once it finds a
// call to move.  A program that waits on each call at once then sees the
// thread rarely: on this project's VM a timed wake-up costs the core about
// 40 us, and waking every 0.5 ms during the waits cost 11-35 % of the time
// of a persistent call at 256 KiB-8 MiB on one node.  A start wakes a
// thread in a long doze unless the application's latest wait began right
// after its latest start (Engine::note_wait_begins): one that computes
// while its calls are in flight has them picked up at once (the first
// after a stretch of calls waited on at once within kMaxDoze).
//
// While calls are in flight and nothing moves, it naps (kNapUs; the
// kernel's timer slack makes that about 70 us) rather than yields: a
// thread that sleeps is scheduled ahead of the application's computation
// when it wakes, one that spins or yields shares the core with it and
// waits its turn.  Across 2 simulated nodes at 2 Gbit/s that took the
// overlap at 1-4 MiB from 41-66 % to 78-98 % (docs/how-it-works.md, "Nonblocking and persistent collectives").  After kNapFor
// without a move (a peer that has not started the call) the naps grow to
// kLongNapUs.
namespace {
constexpr auto kDoze = std::chrono::microseconds(500);
constexpr auto kMaxDoze = std::chrono::milliseconds(5);
constexpr auto kDozeFor = std::chrono::milliseconds(200);
constexpr unsigned kSpinRounds = 64;
constexpr long kNapUs = 20;
constexpr long kLongNapUs = 200;
constexpr auto kNapFor = std::chrono::milliseconds(20);
}  // namespace

void Engine::thread_main() {
    pthread_setname_np(pthread_self(), "nexar-progress");  // in top, ps -L, /proc/PID/task/*/comm
    const Runtime* rt = Runtime::get();
    const bool may_call_mpi = rt && rt->multi_thread();
    unsigned idle_rounds = 0;
    auto last_busy = std::chrono::steady_clock::now();  // a call was in flight
    std::chrono::microseconds doze = kDoze;
    std::chrono::steady_clock::time_point idle_since;
    for (;;) {
        {
            std::unique_lock<std::mutex> lock(wake_mutex_);
            const auto has_work = [&] { return stopping_ || (!idle() && app_waiters.load() == 0); };
            while (!has_work()) {
                idle_rounds = 0;  // the next call's naps start short
                const auto now = std::chrono::steady_clock::now();
                long_doze_ = doze > kDoze;
                if (!idle()) {  // an application thread waits in MPI and moves the calls
                    last_busy = now;
                    wake_.wait_for(lock, doze);
                    doze = std::min<std::chrono::microseconds>(doze * 2, kMaxDoze);
                } else if (now - last_busy < kDozeFor) {
                    wake_.wait_for(lock, doze);
                } else {
                    deep_asleep_ = true;
                    wake_.wait(lock);
                    deep_asleep_ = false;
                }
            }
            if (stopping_) return;
            long_doze_ = false;
        }
        last_busy = std::chrono::steady_clock::now();
        doze = kDoze;
        if (progress(may_call_mpi)) {
            idle_rounds = 0;
            continue;
        }
        if (++idle_rounds < kSpinRounds) continue;
        // Nothing moved for a while: a transfer is on the wire, a peer is
        // slow, or what is left needs an MPI call of the application's.
        const auto now = std::chrono::steady_clock::now();
        if (idle_rounds == kSpinRounds) idle_since = now;
        pause_us(now - idle_since < kNapFor ? kNapUs : kLongNapUs);
    }
}

void Engine::wake_thread() {
    std::lock_guard<std::mutex> lock(wake_mutex_);
    wake_.notify_one();
}

void Engine::stop_thread() {
    {
        std::lock_guard<std::mutex> lock(wake_mutex_);
        stopping_ = true;
        wake_.notify_all();
    }
    if (thread_.joinable()) thread_.join();
}

namespace {

// The agreement of a call that goes to the ring: over UCX where every
// rank runs it and the communicator is small enough for its tags (the
// progress thread moves it along), else a PMPI_Iallreduce (moved along in
// MPI calls).
int post_agreement(NonblockingCall& c) {
    CommContext& ctx = *c.ctx;
    CallAgreement& a = c.task.agreement();
    if (ctx.network() == CommContext::Net::ucx && ctx.size() <= int(kMaxAgreementRounds) + 1) {
        const RingLinks links = ctx.links();
        UcxRingExchange::Ring ring;
        ring.worker = links.worker;
        ring.next = links.next;
        ring.next_rank = links.peers.next_rank;
        ring.prev_rank = links.peers.prev_rank;
        ring.ranks = ctx.size();
        ring.send_tag_id = ctx.tag_id_of(links.peers.next_rank);
        ring.recv_tag_id = ctx.id();
        // Moved only in MPI calls, a peer that computes delays it: no timeout.
        const Config& cfg = Runtime::get()->config();
        c.exchange.emplace(ring, ctx.next_agreement_sequence(), reinterpret_cast<int64_t*>(&a),
                           c.task.agreement_fields(), cfg.progress == ProgressMode::calls ? 0 : cfg.timeout_s);
        return MPI_SUCCESS;
    }
    return pmpi::iallreduce(MPI_IN_PLACE, &a, c.task.agreement_fields(), MPI_INT64_T, MPI_MIN, c.task.call().comm,
                            &c.agreement);
}

}  // namespace

namespace {

// A call for the MPI as it came, unless this rank's device buffers must be
// staged for it: then the engine holds it (its request is nexar's), posted
// now, in the application's order, on the application's communicator.
int pass_through_or_staged(Runtime* rt, const CollectiveCall& given, MPI_Request* request) {
    BufferKinds kinds;
    if (!rt || !rt->config().enable || !request || given.comm == MPI_COMM_NULL || !needs_staging(rt, given, &kinds))
        return pass_through_nonblocking(given, request);
    process_stats().passthrough_calls.fetch_add(1, std::memory_order_relaxed);
    auto call = std::make_shared<NonblockingCall>(*rt, given, true);
    NonblockingCall& c = *call;
    int rc = PMPI_Grequest_start(query_grequest, free_grequest, cancel_grequest, new CallPtr(call), request);
    if (rc != MPI_SUCCESS) {
        NEXAR_ERROR("%s: MPI could not make a request for it (error %d)", given.name, rc);
        return raise_mpi_error(given.comm, rc);
    }
    c.request = *request;
    post_inner(c, c.task.call());
    if (c.stage == NonblockingCall::Stage::inner) report_mpi_call(given, CallMode::nonblocking);
    if (c.stage != NonblockingCall::Stage::inner) {  // nothing is in flight: the call fails here
        PMPI_Grequest_complete(*request);
        pmpi::request_free(request);
        return raise_mpi_error(given.comm, c.result);
    }
    engine().add(call);
    return MPI_SUCCESS;
}

}  // namespace

int start_nonblocking(const CollectiveCall& given, MPI_Request* request) {
    Runtime* rt = Runtime::get();
    if (!rt) rt = Runtime::start_late(given.comm);
    if (!rt || !rt->config().enable || !rt->config().nonblocking || !request)
        return pass_through_or_staged(rt, own_block_as_in_place(given), request);
    auto call = std::make_shared<NonblockingCall>(*rt, given, true);
    NonblockingCall& c = *call;
    switch (c.task.plan()) {
        case TaskStep::agree: break;
        case TaskStep::done: return raise_mpi_error(given.comm, c.task.result());
        default: return pass_through_or_staged(rt, c.task.call(), request);  // a disabled context's, or none
    }
    c.ctx = c.task.context();
    c.device = c.task.buffers().device();
    c.device_id = c.task.buffers().device_id;
    // In flight from here: the runtime keeps its context's inboxes.
    c.ctx->nonblocking_calls.fetch_add(1, std::memory_order_relaxed);
    c.task.end_planning();
    int rc = PMPI_Grequest_start(query_grequest, free_grequest, cancel_grequest, new CallPtr(call), request);
    if (rc == MPI_SUCCESS) {
        c.request = *request;
        if ((rc = post_agreement(c)) != MPI_SUCCESS) {
            PMPI_Grequest_complete(*request);
            pmpi::request_free(request);
        }
    } else {
        NEXAR_ERROR("%s: MPI could not make a request for it (error %d)", c.task.call().name, rc);
    }
    if (rc != MPI_SUCCESS) {
        c.ctx->nonblocking_calls.fetch_sub(1, std::memory_order_relaxed);
        return raise_mpi_error(c.task.call().comm, rc);
    }
    engine().add(call);
    engine().progress(true);
    return MPI_SUCCESS;
}

// ---------------------------------------------------------------- persistent calls

namespace {

// The live persistent calls, by their carrier request.
struct PersistentRegistry {
    std::mutex mutex;
    std::map<MPI_Request, CallPtr> calls;
    std::atomic<size_t> live{0};  // calls.size(), read without the mutex
    std::set<int> tags;  // carriers' tags in use
    int next_tag = 1;
};
PersistentRegistry& persistent_registry() {
    static auto* r = new PersistentRegistry;
    return *r;
}

CallPtr find_persistent(MPI_Request request) {
    PersistentRegistry& reg = persistent_registry();
    if (reg.live.load(std::memory_order_acquire) == 0) return nullptr;
    std::lock_guard<std::mutex> lock(reg.mutex);
    auto it = reg.calls.find(request);
    return it == reg.calls.end() ? nullptr : it->second;
}

// A tag no live carrier has (MPI guarantees tags up to 32767).
int take_carrier_tag() {
    PersistentRegistry& reg = persistent_registry();
    std::lock_guard<std::mutex> lock(reg.mutex);
    for (int tries = 0; tries < 32767; ++tries) {
        const int t = reg.next_tag;
        reg.next_tag = reg.next_tag % 32767 + 1;
        if (reg.tags.insert(t).second) return t;
    }
    return -1;
}

}  // namespace

int init_persistent(const CollectiveCall& given, MPI_Request* request, const std::function<int()>& mpi_own) {
    Runtime* rt = Runtime::get();
    if (!rt) rt = Runtime::start_late(given.comm);
    if (!rt || !rt->config().enable || !rt->config().nonblocking || !request || given.comm == MPI_COMM_NULL)
        return mpi_own();
    // Where device buffers may come and the MPI does not know CUDA, a call
    // nexar does not run cannot be the MPI's own persistent one (a rank's
    // device buffers would reach it): every rank alike makes it a nexar
    // request whose starts post the MPI's nonblocking call instead (its
    // types held, as a nonblocking call's).
    const bool mpi_each_start = rt->device_possible() && !rt->mpi_cuda_aware();
    auto call = std::make_shared<NonblockingCall>(*rt, given, mpi_each_start);
    NonblockingCall& c = *call;
    c.task.make_persistent();
    // Initialization is collective (and may wait): the plan, the agreement
    // and the route are made here, once, as a blocking call's; the context
    // is set up here if the communicator has none yet, and its IPC where
    // every rank's buffers can take it (CollectiveTask::decide_route).
    TaskStep step = c.task.plan();
    if (step == TaskStep::agree) {
        pmpi::allreduce(MPI_IN_PLACE, &c.task.agreement(), c.task.agreement_fields(), MPI_INT64_T, MPI_MIN,
                        c.task.call().comm);
        step = c.task.agreed();
    }
    if (step == TaskStep::done) return raise_mpi_error(given.comm, c.task.result());
    if (step != TaskStep::run && !mpi_each_start) return mpi_own();  // every rank alike: the MPI's own persistent collective
    const int tag = take_carrier_tag();
    int rc = tag < 0 ? MPI_ERR_INTERN : PMPI_Recv_init(nullptr, 0, MPI_INT, 0, tag, carrier_comm(), request);
    if (rc != MPI_SUCCESS) {
        NEXAR_ERROR("%s: MPI could not make a persistent request for it (error %d)", c.task.call().name, rc);
        return raise_mpi_error(given.comm, rc);
    }
    c.ctx = step == TaskStep::pass_through ? nullptr : c.task.context();
    c.persistent = true;
    c.mpi_each_start = step != TaskStep::run;
    c.device = !c.mpi_each_start && c.task.buffers().device();
    c.device_id = c.task.buffers().device_id;
    c.carrier_tag = tag;
    c.request = *request;
    if (c.ctx) c.ctx->nonblocking_calls.fetch_add(1, std::memory_order_relaxed);  // its inboxes stay while it lives
    c.task.end_planning();
    PersistentRegistry& reg = persistent_registry();
    std::lock_guard<std::mutex> lock(reg.mutex);
    reg.calls[*request] = call;
    reg.live.store(reg.calls.size(), std::memory_order_release);
    return MPI_SUCCESS;
}

int start_request(MPI_Request* request) {
    CallPtr call = request ? find_persistent(*request) : nullptr;
    if (!call) return pmpi::start(request);
    NonblockingCall& c = *call;
    const int rc = pmpi::start(request);  // the carrier
    if (rc != MPI_SUCCESS) return rc;
    c.stage = NonblockingCall::Stage::decided;
    c.next = c.mpi_each_start ? TaskStep::fall_back : TaskStep::run;
    c.result = MPI_SUCCESS;
    c.unreported_error.store(MPI_SUCCESS, std::memory_order_relaxed);
    c.raise = false;
    c.run_status = Status::ok;
    c.idle = IdleBackoff(kEngineRoundsBetweenChecks);
    if (c.ctx) c.ctx->nonblocking_calls.fetch_add(1, std::memory_order_relaxed);
    // Without a context, posted now, in the application's order among its
    // other calls on the communicator.
    if (c.mpi_each_start && !c.ctx) post_fall_back(c);
    engine().add(call);
    engine().progress(true);
    return MPI_SUCCESS;
}

int free_request(MPI_Request* request) {
    CallPtr call;
    if (request) {
        PersistentRegistry& reg = persistent_registry();
        std::lock_guard<std::mutex> lock(reg.mutex);
        auto it = reg.calls.find(*request);
        if (it != reg.calls.end()) {
            call = it->second;
            reg.calls.erase(it);
            reg.live.store(reg.calls.size(), std::memory_order_release);
            reg.tags.erase(call->carrier_tag);
        }
    }
    if (call) {
        // Freed while started: it completes first (MPI lets it complete).
        engine().drain([&](const NonblockingCall& c) { return &c == call.get(); });
        if (call->ctx && call->ctx->nonblocking_calls.fetch_sub(1) == 1)
            if (Runtime* rt = Runtime::get()) rt->release_orphan(call->ctx);
    }
    return pmpi::request_free(request);
}

int take_persistent_error(MPI_Request request) {
    if (request == MPI_REQUEST_NULL) return MPI_SUCCESS;
    CallPtr call = find_persistent(request);
    return call ? call->unreported_error.exchange(MPI_SUCCESS, std::memory_order_acq_rel) : MPI_SUCCESS;
}

bool progress_nonblocking(bool wait_for_lock) { return engine().progress(true, wait_for_lock); }

uint64_t nonblocking_completions() { return engine().completions.load(std::memory_order_acquire); }

WaitingInMpi::WaitingInMpi() {
    engine().note_wait_begins();
    engine().app_waiters.fetch_add(1);
}

WaitingInMpi::~WaitingInMpi() {
    if (engine().app_waiters.fetch_sub(1) == 1 && !engine().idle()) engine().wake_thread();
}

bool nonblocking_in_flight() { return !engine().idle(); }

void stop_progress_thread() { engine().stop_thread(); }

void drain_nonblocking(const CommContext* ctx) {
    if (!engine().idle()) engine().drain([&](const NonblockingCall& c) { return c.ctx == ctx; });
}

namespace {
// The state waits for these calls (runtime/runtime.h, InFlightCalls).
const bool g_registered = (set_in_flight_calls({stop_progress_thread, drain_nonblocking}), true);
}  // namespace

}  // namespace nexar
