// The known one-shot: a small blocking allreduce that its communicator took
// as the one-shot before, taken again without building its task.
//
// A call's task (call/collective_task.h) plans it, meets the other ranks
// on the boards with its agreement and input (BoardMeeting), decides its
// route and builds its run: for the smallest calls that bookkeeping costs
// more than the meeting.  Once a call of a (communicator, datatype, op)
// went that way, this thread remembers what the task found out
// (remember_one_shot), and a later call like it, of any count within the
// one-shot's limit, publishes its input with its key (count, datatype, op,
// in place or not) in one go on the boards (algo/one_shot.h,
// KnownOneShot): where every rank published the same key, each reduces
// the inputs and the call is done, one meeting and nothing else.  Where
// any rank did not (its call went through its task, its count differs,
// its communicator failed), no rank reduces anything and every rank's call
// goes through its task as before, whose meeting takes the next sequence:
// the ranks never take different paths, and a disagreement costs one
// meeting more.
//
// The call must be one the task would route to the one-shot on this rank:
// host buffers (where a GPU runtime is loaded, only the buffers the task
// found to be host memory), the context not failed, the learnt threshold
// settled on nexar for its size or a nexar trial of it (counted as the
// learner's route() would), or the fixed one below it.  As the task does,
// it first completes the nonblocking calls started before it on the
// communicator.
//
// A nonblocking allreduce (call/nonblocking.h) may take it too, where
// nothing else of nexar's is in flight: its start publishes, its wait
// reduces (known_nonblocking_one_shot).  Such a call is nexar's at every
// size within the one-shot's limit, on every rank (a nonblocking call's
// route is not learnt), so the learner is not asked; where the keys
// differ, every rank's call meets through its task at the next sequence.
#pragma once

#include <mpi.h>

#include <cstddef>
#include <cstdint>

#include "reduce/types.h"

namespace nexar {

class CollectiveTask;
class CommContext;
class Runtime;
struct CollectiveCall;

// The known one-shot of MPI_Allreduce: true when the call was handled
// (*rc is its return code, success or the error raised through the
// communicator's handler); false: it goes through its task, nothing done.
bool run_known_one_shot(Runtime& rt, const void* sendbuf, void* recvbuf, int64_t count, MPI_Datatype dt, MPI_Op op,
                        MPI_Comm comm, int* rc);

// After a blocking allreduce's task: where it ran the one-shot, what a
// later call like it needs.
void remember_one_shot(Runtime& rt, CollectiveTask& task);
// After a nonblocking allreduce's plan: where it will put its input on the
// boards with its meeting (CollectiveTask::one_shot_input_planned), the same.
void remember_nonblocking_one_shot(Runtime& rt, CollectiveTask& task);

// What a known one-shot run of a nonblocking call needs (KnownOneShotRun).
struct KnownOneShotArgs {
    CommContext* ctx = nullptr;
    const void* src = nullptr;  // the input (recvbuf in place)
    void* recvbuf = nullptr;
    size_t ring_count = 0;
    uint64_t key = 0;
    DataType type{};
    ReduceOp op{};
    uint64_t bytes = 0;
};
// True where this thread knows `call` (an MPI_Iallreduce) and it may take
// the known one-shot: *args says how.
bool known_nonblocking_one_shot(const Runtime& rt, const CollectiveCall& call, KnownOneShotArgs* args);
// A known call was not taken on every rank: this thread forgets calls like
// it until one is planned again (else a rank that can never take the
// one-shot would cost every later call a meeting more).
void forget_known_one_shot(const CollectiveCall& call);

}  // namespace nexar
