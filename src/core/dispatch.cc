// The intercepted blocking collectives' entry points (core/collective.h):
// the driver of a call's task (core/collective_task.h) on the caller's stack.
#include <chrono>
#include <cstring>
#include <string>

#include "core/collective.h"
#include "core/collective_task.h"
#include "core/nonblocking.h"
#include "core/pass_through.h"
#include "core/log.h"
#include "core/pmpi.h"
#include "core/runtime.h"
#include "core/stats.h"
#include "memory/device.h"
#include "reduce/mpi_types.h"

namespace nexar {

int raise_mpi_error(MPI_Comm comm, int error_class) {
    // MPI_Comm_call_errhandler returns MPI_SUCCESS once the handler has run;
    // the caller must still see the error.
    PMPI_Comm_call_errhandler(comm, error_class);
    return error_class;
}

int intercept_allreduce(const void* sendbuf, void* recvbuf, int64_t count, MPI_Datatype dt, MPI_Op op, MPI_Comm comm,
                        bool large_count) {
    // The small call's path, without building a description of it.
    const Runtime* rt = Runtime::get();
    if (!rt) rt = Runtime::start_late(comm);
    if (rt && rt->config().enable && small_allreduce(rt->config(), count, sendbuf, recvbuf)) {
        process_stats().passthrough_calls.fetch_add(1, std::memory_order_relaxed);
        return pmpi::allreduce_count(sendbuf, recvbuf, count, large_count, dt, pmpi_op(dt, op), comm);
    }
    CollectiveCall call =
        allreduce_call(large_count ? "MPI_Allreduce_c" : "MPI_Allreduce", sendbuf, recvbuf, count, dt, op, comm);
    call.large_count = large_count;
    return intercept_collective(call);
}

namespace {

// The agreement: a blocking reduction on every rank, whatever is in
// flight here (MPI matches a blocking collective only with blocking ones;
// nexar's nonblocking calls move along on its progress thread meanwhile).
void agree(CollectiveTask& task) {
    pmpi::allreduce(MPI_IN_PLACE, &task.agreement(), task.agreement_fields(), MPI_INT64_T, MPI_MIN, task.call().comm);
}

// The run polled to its end; nonblocking calls in flight move along too.
Status run(CollectiveTask& task) {
    if (!nonblocking_in_flight()) return poll_to_end(task.run(), task.error());
    struct WithOthers {
        RingCallRun& run;
        Status poll(bool* moved, std::string* error) {
            Status s = run.poll(moved, error);
            if (progress_nonblocking()) *moved = true;
            return s;
        }
        bool finished() const { return run.finished(); }
        Status check_stall(std::chrono::steady_clock::time_point since, std::string* error) {
            return run.check_stall(since, error);
        }
    } both{task.run()};
    return poll_to_end(both, task.error());
}

// Step after step on the caller's stack: what every blocking call does.
int drive_to_end(Runtime& rt, CollectiveTask& task) {
    TaskStep step = task.plan();
    while (step == TaskStep::agree) {
        agree(task);
        step = task.agreed();
    }
    if (step == TaskStep::run) step = task.start_run();
    switch (step) {
        case TaskStep::run: return task.finish(run(task));
        case TaskStep::pass_through: return pass_through(task.call(), process_stats().passthrough_calls);
        case TaskStep::fall_back: return fall_back(rt, *task.context(), task.buffers(), task.call());
        default: return task.result();
    }
}

}  // namespace

int intercept_collective(const CollectiveCall& call) {
    Runtime* rt = Runtime::get();
    if (!rt) rt = Runtime::start_late(call.comm);
    if (!rt || !rt->config().enable) return pass_through(own_block_as_in_place(call), process_stats().passthrough_calls);
    CollectiveTask task(*rt, call);
    return drive_to_end(*rt, task);
}

}  // namespace nexar
