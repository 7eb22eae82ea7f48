// One intercepted collective call as a task with resumable steps (DESIGN.md
// section 7, "start and progress"; UCC's init / post / test / finalize):
//
//   1. plan():    the checks MPI makes identical on every rank, the layout,
//                 what this rank can do with its buffers; local, never waits.
//   2. agreed():  after the driver has reduced agreement() with MIN over the
//                 communicator: mismatched counts and NULL buffers become
//                 errors on every rank together; then decide_route() gives
//                 the call its whole route, the same on every rank: the
//                 MPI's or nexar's, which algorithm, which network.
//   3. start_run(), run(): the run of that algorithm is built, and polled
//                 by the driver until it finishes.
//
// The route is decided in two places only, each once: plan() alone says
// what one rank knows without the others (the call is not nexar's: it
// passes through; the learner sent it to the MPI; or the ranks must
// agree), and decide_route() everything after the agreement.  Whether the
// MPI's path stages device buffers through host memory is that path's own
// question, asked once in needs_staging (call/mpi_staging.h).
//   4. finish():  the last local copy, the copy chooser's timing, the stats,
//                 and errors through the communicator's handler.
//
// The task never calls MPI to wait: the driver owns the agreement's
// reduction and the pass-throughs.  A blocking call drives one task to its
// end on the caller's stack (call/dispatch.cc).  The task holds the
// context's call mutex and the caller's current GPU from plan() until it
// is destroyed.
#pragma once

#include <mpi.h>

#include <chrono>
#include <mutex>
#include <optional>
#include <string>
#include <variant>

#include "call/call_plan.h"
#include "call/collective.h"
#include "call/ring_calls.h"
#include "decide/path_learner.h"
#include "memory/device.h"
#include "runtime/job_report.h"
#include "runtime/runtime.h"

namespace nexar {

// Which of nexar's algorithms runs an agreed call (decide_route).
enum class RingAlgorithm {
    flat,              // the ring over every rank: same-node hops in shared memory, the others on the network
    one_shot,          // a small allreduce on one node: every rank reads every rank's board
    hierarchical,      // rings inside each node, rings across nodes, rings inside again (or a half of that)
    ipc,               // device buffers on one node: GPU to GPU through CUDA IPC
    ipc_hierarchical,  // device allreduce across nodes: IPC inside each node, the device rings across
    ipc_hierarchical_halving_doubling,  // the same with the device halving-doublings across nodes
    halving_doubling,  // host calls across nodes of one rank each: log P exchanges each way
    hierarchical_halving_doubling,  // the hierarchical allreduce with halving-doublings across nodes
};
const char* ring_algorithm_name(RingAlgorithm a);
// The host hierarchical allreduce (or its half), either phase across nodes (HierarchicalRun).
inline bool is_hierarchical(RingAlgorithm a) {
    return a == RingAlgorithm::hierarchical || a == RingAlgorithm::hierarchical_halving_doubling;
}

// What the driver does after a step.
enum class TaskStep {
    agree,         // reduce agreement() with MIN over call().comm, then call agreed()
    run,           // poll run() to its end, then call finish()
    pass_through,  // not the ring's: the call goes to PMPI as it came
    fall_back,     // eligible, but some rank cannot take the ring: PMPI (device buffers staged)
    done,          // over: result() is the call's return code
};

class CollectiveTask {
public:
    // `rt` is started.  An allgather from its own block becomes in place
    // (own_block_as_in_place): call() is what a pass-through hands MPI.
    // A nonblocking task (call/nonblocking.h) holds the call mutex and the
    // caller's current GPU only while it is planned (its steps run inside
    // later MPI calls or on nexar's progress thread, each on its buffers'
    // GPU), calls no error handler (raise_error), feeds no
    // timing to the copy chooser (the application's computation would be
    // in it), and falls back where a blocking call would set released
    // inboxes up again (a collective step that would wait).
    CollectiveTask(Runtime& rt, const CollectiveCall& call, bool nonblocking = false)
        : rt_(rt), cfg_(rt.config()), call_(own_block_as_in_place(call)), nonblocking_(nonblocking),
          asked_in_place_(call.sendbuf == MPI_IN_PLACE) {}
    ~CollectiveTask() { release_ipc_exports(); }
    CollectiveTask(const CollectiveTask&) = delete;
    CollectiveTask& operator=(const CollectiveTask&) = delete;

    const CollectiveCall& call() const { return call_; }
    // Step 1.  agree, pass_through, fall_back or done.
    TaskStep plan();
    // A nonblocking task holds the context's call mutex, and the caller's
    // current GPU, from plan() until this (the engine calls it once the call
    // counts as in flight; its later steps run on other threads too).
    void end_planning() {
        in_call_ = std::unique_lock<std::mutex>();
        device_guard_.reset();
    }
    // A persistent call (before plan()): its rings start with no agreement
    // before them, so they wait for peers that start later
    // (RingOptions::patient_start); its initialization may set IPC up.
    void make_persistent() { persistent_ = true, opt_.patient_start = true; }
    // This rank's part of the agreement, to be reduced in place: by the
    // driver with the MPI, or on the context's boards (board_meeting).
    CallAgreement& agreement() { return agreement_; }
    static constexpr int agreement_fields() { return kCallAgreementFields; }
    // After plan() or agreed() said agree: a blocking call on a communicator
    // whose ranks share one node with the one-shot's boards (alike on every
    // rank) meets on them: its agreement, and where the call may take the
    // one-shot its input too, in one meeting (null: the driver reduces the
    // agreement with the MPI).  The driver polls it to its end, then calls
    // met().
    RingCallRun* board_meeting();
    // Whether board_meeting() meets (after plan() said agree; alike on
    // every rank, whatever the count): a blocking or nonblocking call (not
    // a persistent one) wherever the context has boards.
    bool meets_on_boards() const;
    // ... and takes this rank's input along, for the one-shot.
    bool one_shot_input_planned() const;
    // Step 2 after a board meeting, with its status: as agreed().
    TaskStep met(Status meeting_status);
    // Step 2: agree (again: some rank had released its inboxes, and every
    // rank set them up again), run, fall_back or done (decide_route).  A
    // blocking or persistent call may set IPC up here (collective).
    TaskStep agreed();
    // Step 3, after agreed() said run: the run of the routed algorithm is
    // built (it takes its sequence numbers and the context's scratch now: a
    // nonblocking call waits for its turn on the context first; a
    // persistent call does this at each start).  run or done.
    TaskStep start_run();
    // nexar's progress thread moves this call and may not call the MPI
    // (no MPI_THREAD_MULTIPLE; alike on every rank: agreed at start-up).
    bool ring_may_not_call_mpi() const {
        return nonblocking_ && cfg_.progress == ProgressMode::thread && !rt_.multi_thread();
    }
    // After agreed() said run: the algorithm, and the network its hops off
    // shared memory and IPC take.
    RingAlgorithm algorithm() const { return algorithm_; }
    // After the driver: the call ran the one-shot, and it succeeded.
    bool took_one_shot() const { return run_ && algorithm_ == RingAlgorithm::one_shot && result_ == MPI_SUCCESS; }
    CommContext::Net network() const { return net_; }
    // Valid after start_run() said run.  Its errors go to error().
    RingCallRun& run() { return *run_; }
    std::string* error() { return &error_; }
    // Step 4, with the run's status: the call's return code.
    int finish(Status run_status);
    int result() const { return result_; }
    // A nonblocking or persistent call below the size from which, with the
    // threshold learnt, such calls take nexar's path (kAutoNonblockingBytes).
    bool below_nonblocking_floor() const { return nonblocking_ && cfg_.learn && bytes_ < kAutoNonblockingBytes; }

    // A call timed for NEXAR_THRESHOLD_BYTES=auto's learner (null: not
    // one), from when it was routed (a nexar trial: from when the calls
    // before it on the communicator were done); the driver hands the
    // learner its time.
    const Route* trial() const { return learnt_.trial ? &learnt_ : nullptr; }
    // The vector's bytes, in ring elements (after plan()).
    size_t bytes() const { return bytes_; }
    // The learner's class of the call (with bytes()), once routed.
    const LearnShape& learn_shape() const { return learn_shape_; }
    // A trial whose buffers were agreed to be of another memory kind than
    // its class's: its time is not the class's (the class switches kind).
    bool trial_of_other_memory() const { return trial_other_memory_; }
    // The learner routed it (NEXAR_THRESHOLD_BYTES=auto), to the MPI or to nexar.
    bool routed() const { return learnt_.slot >= 0; }
    // A trial's time: from the call's start to the MPI's return (end_call()),
    // or to now.
    void end_call() { call_t1_ = std::chrono::steady_clock::now(), call_ended_ = true; }
    double call_seconds() const {
        return std::chrono::duration<double>((call_ended_ ? call_t1_ : std::chrono::steady_clock::now()) - call_t0_)
            .count();
    }

    // For a fallback: the communicator's context (null before it was
    // asked for) and where this rank's buffers live.
    CommContext* context() { return ctx_; }
    const LocalPlan& buffers() const { return plan_; }

private:
    TaskStep check_call();
    bool learnt_mpi();
    TaskStep decide_route();
    // The vector is within the one-shot's limit, on what each rank reads
    // from the others' boards (NEXAR_ONE_SHOT_BYTES).
    // Whether the call is small enough for the one-shot: what a rank
    // publishes fits its board's slot, which holds one_shot_bytes / (ranks
    // - 1) (the allreduce's and the reduce-scatter's whole vector; the
    // allgather's block).  Alike on every rank.
    bool one_shot_size() const {
        const uint64_t published = call_.kind == Collective::allgather ? uint64_t(bytes_) / uint64_t(size_) : bytes_;
        return published * uint64_t(size_ - 1) <= cfg_.one_shot_bytes;
    }
    // What this rank publishes for the one-shot (OneShotAllreduce's input).
    const void* one_shot_input() const;
    const OneShotBlocks* one_shot_blocks();
    TaskStep route_to_mpi(const char* why);
    void lay_out_blocks();
    void check_own_buffers();
    void place_ring_buffers();
    void plan_here();
    int64_t ipc_possible();
    // A nonblocking call of device buffers takes the context's GPU work
    // memory at its ring's turn (another call's ring may use it, or a
    // blocking call regrow it, before then).
    bool work_memory_at_turn() const { return nonblocking_ && where_.device(); }
    // A nonblocking call planned while others of its context are in flight.
    bool beside_calls_in_flight() const { return nonblocking_ && ctx_->nonblocking_calls.load() > 0; }
    Status take_work_memory();
    // What exporting the buffers holds (a descriptor: memory/device_api.h),
    // given back once the call is over (its peers opened them during it).
    void release_ipc_exports();
    DeviceEngine& new_device_engine();
    // Collective: where every rank agreed on IPC and the context has none
    // yet, sets it up (a blocking call at its agreement; a persistent one
    // at its initialization: a nonblocking call's steps cannot wait for
    // the other ranks).
    void set_up_agreed_ipc();
    void set_up_ipc();
    std::string crossing_picks() const;
    RingCallRun* build_run();
    Status place_own_block();
    SegmentEngine& call_engine();
    RingAlgorithm ring_algorithm(Schedule schedule, const CallAgreement& a) const;
    bool halving_doubling_takes_it() const;
    Status move_own_block();
    TaskStep fail(int error_class) { return result_ = raise_error(error_class), TaskStep::done; }
    // The communicator's error handler, now; a nonblocking call's is called
    // when its request completes, in an MPI call (the task may be on
    // nexar's progress thread).
    int raise_error(int error_class) { return nonblocking_ ? error_class : raise_mpi_error(call_.comm, error_class); }
    int finish_ring(Status s);
    // NEXAR_REPORT's account of a call nexar ran.
    void report_run(JobReport& report) const;

    Runtime& rt_;
    const Config& cfg_;
    CollectiveCall call_;
    const bool nonblocking_;
    bool persistent_ = false;
    // MPI_IN_PLACE as the caller passed it: MPI has every rank pass it alike
    // (own_block_as_in_place is one rank's own finding).
    const bool asked_in_place_;
    int result_ = MPI_SUCCESS;
    std::string error_;

    // Step 1: the call's shape.
    RingElement element_;
    uint64_t items_ = 0;   // the vector's MPI items (allgather: bytes)
    size_t esz_ = 0;       // bytes of a ring element
    size_t ring_count_ = 0, bytes_ = 0;  // ring elements and bytes of the whole vector
    int size_ = 0, me_ = 0;
    CommContext* ctx_ = nullptr;
    // The network its hops off shared memory take (CommContext::network_for
    // of the call's bytes: alike on every rank).
    CommContext::Net net_ = CommContext::Net::none;
    RingOptions opt_;
    std::unique_lock<std::mutex> in_call_;            // no other thread releases the context's inboxes
    std::optional<CurrentDeviceGuard> device_guard_;  // the application's current GPU comes back
    ChunkLayout layout_;
    CommContext::BlockLayout* blocks_ = nullptr;  // reduce-scatter, allgather: each rank's MPI block
    CommContext::BlockLayout own_blocks_;         // a nonblocking call's
    WorkBuffer own_work_;                         // a nonblocking reduce-scatter's partial sums
    bool in_place_ = false;
    bool buffers_ok_ = true;        // no buffer this rank needs is NULL
    const char* refusal_ = nullptr;  // why this rank's buffers cannot take the ring
    LocalPlan where_, plan_;
    const void* src_ = nullptr;       // what the call reads
    const void* ring_src_ = nullptr;  // what the ring reads and writes
    char* ring_recv_ = nullptr;
    char* own_chunk_out_ = nullptr;  // a reduce-scatter out of place: its block straight into recvbuf
    char* staging_ = nullptr;        // the hierarchical halves' lane-ordered copy (a work buffer)
    bool ring_in_place_ = false, shape_in_place_ = false;
    int variant_ = 0;             // the copy chooser's name for the call's shape
    bool chooses_copy_ = false;   // NEXAR_SHM_COPY=auto times this call
    CopyProposal proposal_;
    CallAgreement agreement_;
    bool reconnected_ = false;
    Route learnt_;  // NEXAR_THRESHOLD_BYTES=auto's choice for a blocking call (MPI or nexar)
    LearnShape learn_shape_;
    bool trial_other_memory_ = false;
    // When the call's own time began: a trial's (for the learner), or any
    // blocking call's where NEXAR_REPORT keeps its time (call_timed_).
    std::chrono::steady_clock::time_point call_t0_, call_t1_;
    bool call_timed_ = false, call_ended_ = false;

    // Step 2: what runs (decide_route).
    RingAlgorithm algorithm_ = RingAlgorithm::flat;
    bool ipc() const { return algorithm_ == RingAlgorithm::ipc || ipc_hierarchical(); }
    bool ipc_hierarchical() const {
        return algorithm_ == RingAlgorithm::ipc_hierarchical ||
               algorithm_ == RingAlgorithm::ipc_hierarchical_halving_doubling;
    }
    CopyProposal used_;
    bool timed_ = false;
    std::chrono::steady_clock::time_point t0_;
    std::optional<AgreementRun> meeting_;    // the agreement on the boards (board_meeting)
    bool input_on_board_ = false;            // ...carried this rank's input for the one-shot
    std::optional<HostEngine> host_engine_;  // before the runs: their channels use it
    std::optional<DeviceEngine> device_engine_;
    // The routed algorithm's run (build_run): one at a time, so the task
    // holds the largest, not all (a nonblocking call's task lives on the heap).
    std::variant<std::monostate, FlatRingRun, HierarchicalRun, OneShotRun, IpcRun, IpcHierarchicalRun,
                 HalvingDoublingRun>
        run_storage_;
    OneShotBlocks one_shot_blocks_;  // its reduce-scatter's or allgather's blocks
    nexar_ipc_memory src_ipc_{}, recv_ipc_{};  // the buffers as ipc_possible() exported them
    const char* ipc_why_ = "";  // why this rank's call cannot take IPC ("": it can, or not a device call)
    char* ipc_scratch_ = nullptr;  // an in-place reduce-scatter's result, until it goes into place
    RingCallRun* run_ = nullptr;
};

}  // namespace nexar
