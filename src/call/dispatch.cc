// The intercepted blocking collectives' entry points (call/collective.h):
// the driver of a call's task (call/collective_task.h) on the caller's stack.
#include <chrono>
#include <cstring>
#include <string>

#include "base/log.h"
#include "call/collective.h"
#include "call/collective_task.h"
#include "call/known_one_shot.h"
#include "call/nonblocking.h"
#include "call/pass_through.h"
#include "memory/device.h"
#include "mpi/pmpi.h"
#include "reduce/mpi_types.h"
#include "runtime/job_report.h"
#include "runtime/runtime.h"
#include "runtime/stats.h"

namespace nexar {

int raise_mpi_error(MPI_Comm comm, int error_class) {
    // MPI_Comm_call_errhandler returns MPI_SUCCESS once the handler has run;
    // the caller must still see the error.
    PMPI_Comm_call_errhandler(comm, error_class);
    return error_class;
}

namespace {

// NEXAR_THRESHOLD_BYTES=auto's fast path for calls that go to the MPI
// (below the floor, or in a size class that settled on it): what this
// thread's latest call of each collective found out, so that the next one
// like it needs neither the datatype table nor the communicator's
// attribute.  It must route exactly as the task would (the learner counts
// the call alike: PathLearner::settled_on_mpi), so it takes only calls
// whose every other check the task would pass, with predefined datatypes
// (a freed derived type's handle may come back as another type).
struct KnownCall {
    MPI_Datatype datatype = MPI_DATATYPE_NULL;  // a (datatype, op) the ring takes
    MPI_Op op = MPI_OP_NULL;                    // (none for the allgather)
    uint64_t item_bytes = 0;                    // bytes of the vector per MPI item
    MPI_Comm comm = MPI_COMM_NULL;  // a communicator the learner routes on, and its context
    CommContext* ctx = nullptr;
    uint64_t generation = 0;  // Runtime::context_generation() when ctx was seen
};
thread_local KnownCall t_known[kCollectives];

// The vector's `bytes`: below the floor the call passes through; from it,
// where the call's class settled on the MPI, or on a communicator of one
// rank (`size`: the communicator's, 0 when not asked yet), which the ring
// never takes.
bool known_to_pass(const Runtime& rt, const KnownCall& k, Collective kind, bool in_place, MPI_Comm comm,
                   uint64_t bytes, int size = 0) {
    if (bytes < threshold_bytes_for(rt.config(), kind)) return true;
    if (comm == k.comm && k.generation == rt.context_generation()) {
        PathLearner& learner = k.ctx->learner();
        return learner.settled_on_mpi(learner.shape_of(kind, in_place, bytes), bytes);
    }
    if (size == 0 && PMPI_Comm_size(comm, &size) != MPI_SUCCESS) return false;
    return size == 1;
}

bool learnt_mpi_fast(const Runtime& rt, const void* sendbuf, const void* recvbuf, int64_t count, MPI_Datatype dt,
                     MPI_Op op, MPI_Comm comm) {
    const KnownCall& k = t_known[int(Collective::allreduce)];
    if (dt != k.datatype || op != k.op || count < 0 || !sendbuf || !recvbuf || sendbuf == recvbuf ||
        sendbuf == MPI_BOTTOM || recvbuf == MPI_BOTTOM || comm == MPI_COMM_NULL)
        return false;
    return known_to_pass(rt, k, Collective::allreduce, sendbuf == MPI_IN_PLACE, comm, uint64_t(count) * k.item_bytes);
}

// The reduce-scatter with one count for all (MPI_Reduce_scatter_block) and
// the allgather.
bool learnt_mpi_fast(const Runtime& rt, const CollectiveCall& c) {
    const KnownCall& k = t_known[int(c.kind)];
    const bool allgather = c.kind == Collective::allgather;
    if (c.kind == Collective::allreduce || c.varying || c.recvcounts || c.datatype != k.datatype ||
        (!allgather && c.op != k.op) || c.count < 0 || (allgather && c.sendbuf != MPI_IN_PLACE && c.sendcount < 0) ||
        c.comm == MPI_COMM_NULL)
        return false;
    // The communicator's size: its context's, where it is the one known.
    int size = 0;
    if (c.comm == k.comm && k.generation == rt.context_generation())
        size = k.ctx->size();
    else if (PMPI_Comm_size(c.comm, &size) != MPI_SUCCESS)
        return false;
    return known_to_pass(rt, k, c.kind, c.sendbuf == MPI_IN_PLACE, c.comm,
                         uint64_t(c.count) * uint64_t(size) * k.item_bytes, size);
}

// After the task: what the fast path may use next time.
void remember(const Runtime& rt, CollectiveTask& task, const CollectiveCall& c) {
    if (c.kind != Collective::allreduce && (c.varying || c.recvcounts)) return;
    KnownCall& k = t_known[int(c.kind)];
    const MPI_Op op = c.kind == Collective::allgather ? MPI_OP_NULL : c.op;
    if (c.datatype != k.datatype || op != k.op) {
        k = KnownCall();
        RingElement e;
        int type_size = 0;
        if (c.kind == Collective::allgather) {
            if (!known_mpi_datatype(c.datatype) || PMPI_Type_size(c.datatype, &type_size) != MPI_SUCCESS) return;
            k.item_bytes = uint64_t(type_size);
        } else {
            if (!map_mpi_call(c.datatype, op, &e) || mpi_forbids(c.datatype, op)) return;
            k.item_bytes = uint64_t(e.per_item) * datatype_size(e.type);
        }
        k.datatype = c.datatype, k.op = op;
    }
    if (task.routed()) k.comm = c.comm, k.ctx = task.context(), k.generation = rt.context_generation();
}

}  // namespace

// The run polled to its end; nonblocking calls in flight move along too.
Status run_to_end(RingCallRun& task_run, std::string* error) {
    if (!nonblocking_in_flight()) return poll_to_end(task_run, error);
    // The others' moves keep the loop busy, not this call's clock running
    // (IdleClock::idle_since_or).
    struct WithOthers {
        RingCallRun& run;
        IdleClock own;
        Status poll(bool* moved, std::string* error) {
            bool mine = false;
            Status s = run.poll(&mine, error);
            own.after_round(mine);
            const bool others = progress_nonblocking();
            *moved = mine || others;
            return s;
        }
        bool finished() const { return run.finished(); }
        Status check_stall(std::chrono::steady_clock::time_point since, std::string* error) {
            return run.check_stall(own.idle_since_or(since), error);
        }
    } both{task_run, IdleClock()};
    return poll_to_end(both, error);
}

namespace {

// The agreement, on every rank: a meeting on the context's boards where it
// has them, else a blocking reduction of the MPI's, whatever is in flight
// here (MPI matches a blocking collective only with blocking ones; nexar's
// nonblocking calls move along on its progress thread meanwhile).
TaskStep agree(CollectiveTask& task) {
    if (RingCallRun* meeting = task.board_meeting()) return task.met(run_to_end(*meeting, task.error()));
    pmpi::allreduce(MPI_IN_PLACE, &task.agreement(), task.agreement_fields(), MPI_INT64_T, MPI_MIN, task.call().comm);
    return task.agreed();
}

// The MPI's path for a task's call (call/pass_through.h).  A learner's
// trial is timed to the MPI's return, before NEXAR_REPORT sizes the call
// (which asks MPI for sizes: not the MPI's time).
int mpi_path_of(Runtime& rt, CollectiveTask& task, std::atomic<uint64_t>& counter) {
    if (!task.trial()) return mpi_path(&rt, task.call(), counter);
    const int rc = mpi_path(&rt, task.call(), counter, false);
    task.end_call();
    if (rc == MPI_SUCCESS) report_mpi_call(task.call(), CallMode::blocking);
    return rc;
}

// The steps after the plan, to the call's return code.
int complete(Runtime& rt, CollectiveTask& task, TaskStep step) {
    while (step == TaskStep::agree) step = agree(task);
    if (step == TaskStep::run) step = task.start_run();
    switch (step) {
        case TaskStep::run: return task.finish(run_to_end(task.run(), task.error()));
        case TaskStep::pass_through: return mpi_path_of(rt, task, process_stats().passthrough_calls);
        case TaskStep::fall_back: return mpi_path_of(rt, task, process_stats().fallback_calls);
        default: return task.result();
    }
}

// NEXAR_THRESHOLD_BYTES=auto: a trial's time to the learner; after the
// round's last, the slowest rank's best times settle the verdict on every
// rank (every rank counted the same calls, so every rank reduces here).
// A call that failed here leaves no time (its path's best stays 1e30 on
// this rank, and the MAX gives every rank the other path).
void learn_from(CollectiveTask& task, bool succeeded) {
    const Route* trial = task.trial();
    if (!trial) return;
    PathLearner& learner = task.context()->learner();
    if (succeeded && !task.trial_of_other_memory()) {
        const double seconds = task.call_seconds();
        learner.record(*trial, seconds);
        // NEXAR_REPORT's estimate of the MPI's time: its warm trials' mean
        // (a block's first runs cold, right after nexar's calls).
        JobReport* report = job_report();
        if (report && trial->path == CallPath::mpi) {
            const LearnShape& shape = task.learn_shape();
            if (!trial->cold)
                report->add_mpi_trial(task.call().kind,
                                      ReportCounts::shape(shape.in_place, shape.memory == LearnMemory::device),
                                      task.bytes(), seconds);
            NEXAR_DEBUG("communicator context %u: %s %s on %s buffers of %zu bytes: an MPI trial took %.3f us here%s",
                        task.context()->id(), task.call().name, shape.in_place ? "in place" : "out of place",
                        learn_memory_name(shape.memory), task.bytes(), seconds * 1e6,
                        trial->cold ? " (cold, the first of its block: not in the report's estimate)" : "");
        }
    }
    if (trial->ends_round)
        end_learning_round(*task.context(), *trial, task.learn_shape(), task.call().name, task.bytes(),
                           task.call().comm);
}

}  // namespace

void end_learning_round(CommContext& ctx, const Route& trial, const LearnShape& shape, const char* name, size_t bytes,
                        MPI_Comm comm) {
    PathLearner& learner = ctx.learner();
    double slowest[2];
    learner.best_times(trial, slowest);
    pmpi::allreduce(MPI_IN_PLACE, slowest, 2, MPI_DOUBLE, MPI_MAX, comm);
    const bool changed = learner.settle(trial, slowest);
    const int size_class = PathLearner::size_class(bytes);
    CallPath path = CallPath::mpi;
    learner.verdict(shape, size_class, &path, nullptr);
    NEXAR_DEBUG("communicator context %u: %s %s from %s on %s buffers: %s%s (slowest rank's best: nexar %.1f us, "
                "MPI %.1f us)",
                ctx.id(), name, shape.in_place ? "in place" : "out of place",
                format_bytes(uint64_t(1) << size_class).c_str(), learn_memory_name(shape.memory),
                call_path_name(path), changed ? "" : " still", slowest[int(CallPath::nexar)] * 1e6,
                slowest[int(CallPath::mpi)] * 1e6);
}

namespace {

// Step after step on the caller's stack: what every blocking call does.
// Every rank that routed a round's last trial reduces its times, even
// where the call threw (shim_guard catches it): a rank that did not would
// leave the others waiting.
int drive_to_end(Runtime& rt, CollectiveTask& task) {
    int rc = MPI_SUCCESS;
    try {
        rc = complete(rt, task, task.plan());
    } catch (...) {
        learn_from(task, false);
        throw;
    }
    learn_from(task, rc == MPI_SUCCESS);
    return rc;
}

}  // namespace

int intercept_allreduce(const void* sendbuf, void* recvbuf, int64_t count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                        bool large_count, const char* name) {
    if (!name) name = large_count ? "MPI_Allreduce_c" : "MPI_Allreduce";
    // The small call's paths, without building a description of it: below
    // the threshold, the known one-shot (which declines a size the learner
    // sent to the MPI), or the learner's MPI.
    Runtime* rt = Runtime::get();
    if (!rt) rt = Runtime::start_late(comm);
    int rc = MPI_SUCCESS;
    const bool small = rt && rt->config().enable && small_allreduce(rt->config(), count, sendbuf, recvbuf);
    if (rt && rt->config().enable && !small && run_known_one_shot(*rt, sendbuf, recvbuf, count, dt, op, comm, &rc))
        return rc;
    if (small || (rt && rt->config().enable && rt->config().learn &&
                  learnt_mpi_fast(*rt, sendbuf, recvbuf, count, dt, op, comm))) {
        if (!rt->stages_device_buffers()) {
            process_stats().passthrough_calls.fetch_add(1, std::memory_order_relaxed);
            const int rc = pmpi::allreduce_count(sendbuf, recvbuf, count, large_count, dt, pmpi_op(dt, op), comm);
            if (rc == MPI_SUCCESS && job_report())
                report_mpi_call(allreduce_call("MPI_Allreduce", sendbuf, recvbuf, count, dt, op, comm, large_count),
                                CallMode::blocking);
            return rc;
        }
        return mpi_path(rt, allreduce_call(name, sendbuf, recvbuf, count, dt, op, comm, large_count),
                        process_stats().passthrough_calls);
    }
    CollectiveCall call = allreduce_call(name, sendbuf, recvbuf, count, dt, op, comm, large_count);
    if (!rt || !rt->config().enable) return intercept_collective(call);
    CollectiveTask task(*rt, call);
    rc = drive_to_end(*rt, task);
    if (rt->config().learn) remember(*rt, task, call);
    remember_one_shot(*rt, task);
    return rc;
}

int intercept_collective(const CollectiveCall& call) {
    Runtime* rt = Runtime::get();
    if (!rt) rt = Runtime::start_late(call.comm);
    if (rt && rt->config().enable && rt->config().learn && learnt_mpi_fast(*rt, call))
        return mpi_path(rt, call.kind == Collective::allgather ? own_block_as_in_place(call) : call,
                        process_stats().passthrough_calls);
    if (!rt || !rt->config().enable) return pass_through(own_block_as_in_place(call), process_stats().passthrough_calls);
    CollectiveTask task(*rt, call);
    const int rc = drive_to_end(*rt, task);
    if (rt->config().learn) remember(*rt, task, call);
    return rc;
}

}  // namespace nexar
