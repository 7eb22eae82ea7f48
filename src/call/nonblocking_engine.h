// Inside the nonblocking collectives (call/nonblocking.h): one call in
// flight (NonblockingCall), and the engine that moves every call in flight
// along, in the order they were started (call/nonblocking_engine.cc: each
// call's steps, and nexar's progress thread).  call/nonblocking.cc starts
// the calls, nonblocking and persistent, and takes their steps that post
// the MPI's own calls.
#pragma once

#include <mpi.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "algo/ring.h"
#include "call/collective_task.h"
#include "call/known_one_shot.h"
#include "call/mpi_staging.h"
#include "transport/ucx_exchange.h"

namespace nexar {

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
CollectiveCall holding_types(const CollectiveCall& given, HeldTypes& held);

// One nonblocking call: its task and where it stands.
struct NonblockingCall : std::enable_shared_from_this<NonblockingCall> {
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
    // ... or on the context's boards, with the input, at the call's turn
    // (CollectiveTask::meets_on_boards): its meeting once it has begun.
    bool meets_on_boards = false;
    RingCallRun* meeting = nullptr;
    // ... or first as a known one-shot (call/known_one_shot.h): its task
    // is planned only where the ranks' keys differ.  Its run is made at
    // its turn (it takes the context's next board sequence then).
    bool known_first = false;
    KnownOneShotArgs known_args;
    std::optional<KnownOneShotRun> known;
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
    bool carrier_started = false;  // this start's carrier is active in the MPI
    bool active = false;           // started, its request not completed yet
    // A persistent call whose run is the one-shot allreduce (agreed at its
    // initialization, on every rank alike): a start may run it beside the
    // engine (Engine::start_alone), its carrier not started unless it
    // joins the list.
    bool may_run_alone = false;
    // A persistent call's failure, until a completion call has reported it.
    std::atomic<int> unreported_error{MPI_SUCCESS};
};
using CallPtr = std::shared_ptr<NonblockingCall>;

// Every call in flight, in the order they were started, and the progress
// thread that moves them along while the application computes.
//
// One call may run beside the list instead ("alone"): a persistent
// one-shot (may_run_alone), or a known nonblocking one-shot, started while
// nothing else is in flight.  Its
// start takes the context's next board sequence and publishes its input
// at once; the application's MPI_Wait or MPI_Test on it polls it to its
// end there (complete_alone), with no round of the engine, no lock and no
// progress thread: the one-shot needs nothing of this rank once its input
// is on the board.  Anything else that needs the engine (a call started,
// a drain, any other completion call, Engine::take_in_alone) takes it
// into the list first, at its place in start order.
class Engine {
public:
    // Takes the call alone into the list first.
    void add(CallPtr c);
    // Nothing in flight, in the list or alone.
    bool idle() const { return !in_list() && !alone_.load(std::memory_order_acquire); }
    bool in_list() const { return in_flight_.load(std::memory_order_acquire) != 0; }
    // One round over every call in the list.  `may_call_mpi`: the steps
    // that call MPI (the agreement over MPI, fallbacks, completing
    // requests) run too.  wait_for_lock: wait for another thread's round
    // rather than skip it (an MPI_Test must see what that round finished).
    bool progress(bool may_call_mpi, bool wait_for_lock = false);
    // Moves the calls along until none that `match` is in flight (the
    // call alone taken in first).
    template <class Match>
    void drain(const Match& match) {
        take_in_alone();
        IdleBackoff idle;
        while (!idle_of(match)) idle.after_round(progress(true));
    }
    // At MPI_Start of a persistent call that may run alone (in the
    // application's thread, its carrier not started), or at the start of a
    // known nonblocking one-shot: where nothing else is in flight, its run
    // starts here and publishes its input; true (the call is alone, or in
    // the list where another thread's call went alone meanwhile).  False:
    // nothing done (the caller starts the carrier and adds it).
    bool start_alone(NonblockingCall& c);
    // The application waits on (`wait`) or tests `request`: where it is
    // the call alone, it is polled here, to its end or once.
    // True where it completed here (its carrier never started: the MPI's
    // completion call returns at once).  A test that did not finish it
    // puts it into the list.
    bool complete_alone(MPI_Request request, bool wait);
    // The call alone, if any, goes into the list, behind any there.
    void take_in_alone();
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
    bool meet_step(NonblockingCall& c, bool may_call_mpi);
    bool known_step(NonblockingCall& c, bool may_call_mpi);
    bool run_step(NonblockingCall& c);
    // After the agreement: `next` (the task's agreed() or met()).
    void decide(NonblockingCall& c, TaskStep next);
    std::vector<CallPtr> take_finished();
    void complete(std::vector<CallPtr>& done);
    // Completes c's request (c out of the list; `listed`: it was in it).
    void complete_request(NonblockingCall& c, bool listed);
    // A call alone joins the list: its carrier starts.
    void list_alone(NonblockingCall& c);
    void thread_main();

    std::mutex mutex_;  // the calls, and one round of progress at a time
    std::deque<CallPtr> calls_;
    std::atomic<int> in_flight_{0};
    // The call alone (held by the persistent registry while it lives, or
    // by its generalized request): whichever thread swaps it out owns it.
    std::atomic<NonblockingCall*> alone_{nullptr};

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

// The one engine of the process (never destroyed: requests may outlive
// static destructors).
Engine& engine();

// A call's steps that post or finish the MPI's own call (call/nonblocking.cc).
// The call itself on the context's duplicate communicator (a call without
// a context, persistent: on its own).
void post_fall_back(NonblockingCall& c);
// Its inner request completed: a staged result goes back to the device.
void finish_inner(NonblockingCall& c);
// A persistent call's carrier starts, and completes where it was started
// (call/nonblocking.cc).
int start_carrier(NonblockingCall& c);
// ...after the call started (it ran alone so far): a failure is only said.
void start_carrier_late(NonblockingCall& c);
void complete_carrier(NonblockingCall& c);
// Moves the MPI's own requests along once (while a call alone is waited on).
void nudge_mpi();

}  // namespace nexar
