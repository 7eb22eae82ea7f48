// The engine of the nonblocking calls in flight, and nexar's progress
// thread (call/nonblocking_engine.h).
#include "call/nonblocking_engine.h"

#include <pthread.h>
#include <time.h>

#include <algorithm>
#include <array>

#include "base/log.h"
#include "call/nonblocking.h"
#include "mpi/pmpi.h"
#include "runtime/job_report.h"
#include "runtime/runtime.h"
#include "runtime/stats.h"

namespace nexar {

Engine& engine() {
    static Engine* e = new Engine;
    return *e;
}

namespace {

void pause_us(long us) {
    timespec t{0, us * 1000};
    nanosleep(&t, nullptr);
}

}  // namespace

void Engine::add(CallPtr c) {
    take_in_alone();  // started before it
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
void Engine::decide(NonblockingCall& c, TaskStep next) {
    c.next = next;  // never agree: a nonblocking task falls back instead (a void meeting meets again: meet_step)
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
            decide(c, c.task.agreed());
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
    if (flag) decide(c, c.task.agreed());
    return flag != 0;
}

// The agreement on the boards, with the input (its turn has come: no
// earlier call of the context is undecided or busy).  Its stall checks as
// a run's (run_step).
bool Engine::meet_step(NonblockingCall& c, bool may_call_mpi) {
    if (c.known_first) return known_step(c, may_call_mpi);
    if (!c.meeting && !(c.meeting = c.task.board_meeting())) {
        // (Not on any rank: every rank's context has boards, or none.)
        NEXAR_ERROR("%s on communicator context %u: its meeting on the boards could not be made", c.task.call().name,
                    c.ctx->id());
        c.result = MPI_ERR_INTERN;
        c.raise = true;
        c.stage = NonblockingCall::Stage::complete;
        return true;
    }
    bool moved = false;
    Status s = c.meeting->poll(&moved, c.task.error());
    if (ok(s) && !c.meeting->finished() && c.idle.after_round(moved))
        s = c.meeting->check_stall(c.idle.idle_since(), c.task.error());
    if (ok(s) && !c.meeting->finished()) return moved;
    c.meeting = nullptr;
    c.idle = IdleBackoff(kEngineRoundsBetweenChecks);
    const TaskStep next = c.task.met(s);
    if (next != TaskStep::agree) decide(c, next);  // (agree: a peer took the sequence otherwise; the next round meets again)
    return true;
}

// A known one-shot (call/known_one_shot.h): taken by every rank, it is
// the call; else every rank's call plans its task, which meets at the
// next sequence (planning asks the MPI: in an application thread's round).
bool Engine::known_step(NonblockingCall& c, bool may_call_mpi) {
    using Stage = NonblockingCall::Stage;
    const KnownOneShotArgs& k = c.known_args;
    if (!c.known) {
        RingOptions opt;
        opt.timeout_s = Runtime::get()->config().nonblocking_timeout_s();
        c.known.emplace(*k.ctx, opt, k.key, k.src, k.recvbuf, k.ring_count, k.type, k.op);
    }
    KnownOneShotRun& run = *c.known;
    bool moved = false;
    Status s = Status::ok;
    if (run.valid()) {  // (valid on every rank alike: where not, every rank's task meets)
        s = run.poll(&moved, c.task.error());
        if (ok(s) && !run.finished() && c.idle.after_round(moved))
            s = run.check_stall(c.idle.idle_since(), c.task.error());
        if (ok(s) && !run.finished()) return moved;
    }
    const bool taken = ok(s) && run.valid() && run.taken();
    if (ok(s) && !taken && !may_call_mpi) return moved;
    if (taken) run.account();
    c.known.reset();
    c.known_first = false;
    if (!ok(s) || taken) {
        if (!ok(s)) {
            c.ctx->mark_failed();
            NEXAR_ERROR("MPI_Iallreduce of %llu bytes on communicator context %u failed: %s: %s",
                        (unsigned long long)k.bytes, c.ctx->id(), status_string(s), c.task.error()->c_str());
        } else if (JobReport* report = job_report()) {
            report->add_nexar(Collective::allreduce, CallMode::nonblocking,
                              ReportCounts::shape(c.task.call().sendbuf == MPI_IN_PLACE, false), k.bytes,
                              ReportPath::one_shot, -1);
        }
        c.result = taken ? MPI_SUCCESS : MPI_ERR_OTHER;
        c.raise = !taken;
        c.stage = Stage::complete;
        return true;
    }
    c.idle = IdleBackoff(kEngineRoundsBetweenChecks);
    forget_known_one_shot(c.task.call());
    const TaskStep planned = c.task.plan();
    c.task.end_planning();
    if (planned == TaskStep::agree && c.task.meets_on_boards()) return true;  // it meets in its next step
    // (Not where every rank's checks are alike: the known call's are the
    // task's, the fixed threshold's among them.)
    NEXAR_WARN("MPI_Iallreduce on communicator context %u: its task did not plan a meeting after its known one-shot; "
               "it goes to the MPI",
               c.ctx->id());
    decide(c, planned == TaskStep::done ? TaskStep::done : TaskStep::fall_back);
    return true;
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
            // Decisions in start order: fallbacks are posted in it.  A
            // meeting on the boards takes the context's next board
            // sequence: at its turn.
            if (c.meets_on_boards) return !earlier_undecided && !earlier_busy && meet_step(c, may_call_mpi);
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
    for (CallPtr& call : done) complete_request(*call, true);
}

void Engine::complete_request(NonblockingCall& c, bool listed) {
    if (c.raise) raise_mpi_error(c.task.call().comm, c.result);
    if (c.ctx) c.ctx->nonblocking_calls.fetch_sub(1, std::memory_order_relaxed);
    c.held_types.release();  // before the request completes: the application may then finalize
    if (c.persistent) {
        c.unreported_error.store(c.result, std::memory_order_release);
        c.active = false;
        complete_carrier(c);
    } else {
        PMPI_Grequest_complete(c.request);
    }
    if (c.device) device_calls_.fetch_sub(1, std::memory_order_relaxed);
    if (!listed) return;  // (a call alone: no wait_progressing counts on it)
    in_flight_.fetch_sub(1, std::memory_order_release);
    completions.fetch_add(1, std::memory_order_release);
}

bool Engine::start_alone(NonblockingCall& c) {
    using Stage = NonblockingCall::Stage;
    if (!idle()) return false;
    // Its turn, as in a round (step): the run takes the context's next
    // sequence and publishes its input.
    step(c, false, false, true);
    if (c.stage == Stage::running) step(c, false, false, true);
    NonblockingCall* none = nullptr;
    if (alone_.compare_exchange_strong(none, &c, std::memory_order_acq_rel)) return true;
    // Another thread's call went alone meanwhile (on another communicator:
    // one's calls come in one order): this one joins the list.
    list_alone(c);
    return true;
}

bool Engine::complete_alone(MPI_Request request, bool wait) {
    using Stage = NonblockingCall::Stage;
    NonblockingCall* c = alone_.load(std::memory_order_acquire);
    if (!c || c->request != request || !alone_.compare_exchange_strong(c, nullptr, std::memory_order_acq_rel))
        return false;
    // Its steps, as in a round, with the rounds' yields and stall checks
    // (run_step).  A wait also moves the MPI's own requests now and then:
    // a peer may wait for one of them before it starts this call.
    // (A test takes the steps that move: a finished run's last ones are local.)
    for (unsigned round = 1; c->stage != Stage::complete; ++round) {
        const bool moved = step(*c, false, false, true);
        if (!wait && !moved) break;
        if (!moved && round % kIdleSpinsBeforeYield == 0) nudge_mpi();
    }
    if (c->stage != Stage::complete) {  // a test: the engine moves it from here
        list_alone(*c);
        return false;
    }
    complete_request(*c, false);
    return true;
}

void Engine::list_alone(NonblockingCall& c) {
    if (c.persistent) start_carrier_late(c);  // (a nonblocking call's request is its own)
    add(c.shared_from_this());
}

void Engine::take_in_alone() {
    if (!alone_.load(std::memory_order_relaxed)) return;
    // Counted first: the engine is never seen idle meanwhile.
    in_flight_.fetch_add(1, std::memory_order_acq_rel);
    if (NonblockingCall* c = alone_.exchange(nullptr, std::memory_order_acq_rel)) list_alone(*c);
    in_flight_.fetch_sub(1, std::memory_order_release);
}

bool Engine::progress(bool may_call_mpi, bool wait_for_lock) {
    using Stage = NonblockingCall::Stage;
    if (!in_list()) return false;
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
        // Its next steps at once, while each takes it to another stage (a
        // small call's meeting, run and finish, where its peers are there).
        for (Stage before = c->stage; step(*c, seen.undecided, seen.busy, may_call_mpi);) {
            moved = true;
            if (c->stage == before || c->stage == Stage::complete) break;
            before = c->stage;
        }
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
            // (Not the call alone: the application's wait moves it.)
            const auto has_work = [&] { return stopping_ || (in_list() && app_waiters.load() == 0); };
            while (!has_work()) {
                idle_rounds = 0;  // the next call's naps start short
                const auto now = std::chrono::steady_clock::now();
                long_doze_ = doze > kDoze;
                if (in_list()) {  // an application thread waits in MPI and moves the calls
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

bool progress_nonblocking(bool wait_for_lock) {
    engine().take_in_alone();
    return engine().progress(true, wait_for_lock);
}

uint64_t nonblocking_completions() { return engine().completions.load(std::memory_order_acquire); }

WaitingInMpi::WaitingInMpi() {
    engine().note_wait_begins();
    engine().app_waiters.fetch_add(1);
}

WaitingInMpi::~WaitingInMpi() {
    if (engine().app_waiters.fetch_sub(1) == 1 && engine().in_list()) engine().wake_thread();
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
