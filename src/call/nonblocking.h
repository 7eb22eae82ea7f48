// Nonblocking collectives (MPI_Iallreduce, MPI_Ireduce_scatter_block,
// MPI_Ireduce_scatter, MPI_Iallgather): a call's task (call/collective_task.h)
// in flight behind an MPI request.
//
// The request is a generalized request (PMPI_Grequest_start): a real
// request of the MPI underneath, so every completion call, MPI's own
// requests in the same array, MPI_Request_free, the Fortran bindings and
// other tools all take it as they take any other.  MPI cannot move nexar's
// work along, though, and completes the request only when nexar says so:
//   - nexar's progress thread (NEXAR_PROGRESS=thread, the default) moves
//     the agreement and the ring while the application computes, and
//     sleeps while nothing is in flight;
//   - nexar's completion calls (shim/request_shim.cc) and its blocking
//     collectives move every call along while they wait, and take the
//     steps that need MPI: completing the request, fallbacks, error
//     handlers (the thread takes them too where MPI_THREAD_MULTIPLE
//     allows it to call MPI).
//
// A call never waits for another rank at its start.  Its steps:
//   - plan, at the start (local);
//   - the agreement: the same vector a blocking call reduces with
//     PMPI_Allreduce, reduced with MIN around the ring in UCX tag messages
//     (transport/ucx_exchange.h), which the thread can move without MPI
//     (MPI's own nonblocking collectives progress only inside MPI calls:
//     Open MPI's overlapped nothing).  Communicators larger than the tags
//     allow use a PMPI_Iallreduce.  On a communicator with the one-shot's
//     boards (one node) every call meets on them instead, at its turn
//     (CollectiveTask::meets_on_boards), with its input where it is small
//     enough for the one-shot: one meeting, and counts that differ
//     between the ranks are seen there;
//   - then, in the order the calls were started on the communicator: the
//     ring (one at a time: the context's scratch and ring sequence serve one
//     ring), or, where some rank cannot take it, the call itself as a
//     PMPI_I* on the context's own duplicate of the communicator (posted
//     later than the call, it must not meet the application's collectives);
//   - at the end, in an MPI call, the request completes with the call's
//     result; an error also goes to the communicator's error handler, as a
//     blocking call's does.
// Calls that the ring would never take (small, ineligible, a communicator
// without a context yet) go to PMPI_I* at once.
//
// Here the calls start (call/nonblocking.cc); call/nonblocking_engine.h
// holds a call in flight and the engine that moves the calls along.
#pragma once

#include <mpi.h>

#include <cstdint>
#include <functional>

#include "algo/ring.h"
#include "call/collective.h"

namespace nexar {

class CommContext;

// Starts a nonblocking collective; *request is the application's.
int start_nonblocking(const CollectiveCall& call, MPI_Request* request);

// Persistent collectives (MPI_Allreduce_init, MPI_Reduce_scatter_block_init,
// MPI_Allgather_init; Open MPI 4's MPIX_*_init): planned and agreed once,
// here (initialization is collective), so that each MPI_Start skips the
// agreement.  Where the ring cannot take the call, every rank makes the
// MPI's own instead (`mpi_own`).  The request is a carrier of nexar's (a
// persistent request of the MPI's: see nonblocking.cc).
int init_persistent(const CollectiveCall& call, MPI_Request* request, const std::function<int()>& mpi_own);
// MPI_Start of any request: nexar's persistent calls start their ring (a
// one-shot's publishes its input at once, where nothing else is in
// flight), the MPI's own requests go to PMPI_Start.
int start_request(MPI_Request* request);
// A persistent one-shot that runs beside the engine (Engine::start_alone
// in call/nonblocking_engine.h), moved along by MPI_Wait (to its end) or
// MPI_Test (once) of its request: true where it completed here.  Its
// carrier never started (the MPI's completion call then returns at once,
// the request inactive); a test that did not finish it starts the carrier
// and hands the call to the engine.  False where `request` is not that call.
// (Only where every completion call reaches nexar, and not under
// MPI_THREAD_MULTIPLE: nonblocking.cc, may_run_alone_here.)
bool complete_alone(MPI_Request request, bool wait);
// After a completion call completed `request`: the error of nexar's
// persistent call whose run failed (once per run), else MPI_SUCCESS.  Its
// carrier completes successfully all the same (nonblocking.cc): the
// completion calls give this error instead.
int take_persistent_error(MPI_Request request);
// MPI_Request_free of any request: a persistent call of nexar's lets go of
// what it holds (waiting for it first if it was started).
int free_request(MPI_Request* request);

// Moves every nonblocking call in flight along as far as it goes without
// waiting.  True when something moved.  Cheap when none is in flight.
// wait_for_lock: if another thread is moving them, wait for its round to
// end and take one more, rather than return at once.
bool progress_nonblocking(bool wait_for_lock = false);

// Whether a nonblocking call of nexar is in flight in this process.
bool nonblocking_in_flight();

// Stops the progress thread (MPI_Finalize, before the contexts go).
void stop_progress_thread();

// Completes every nonblocking call on `ctx`: before a blocking collective
// that takes its ring (MPI orders it after them), before the context goes.
void drain_nonblocking(const CommContext* ctx);

// While an application thread waits in one of nexar's completion calls it
// moves the calls along itself: the progress thread keeps out of its way
// (on a busy machine the two would take turns on one core).
class WaitingInMpi {
public:
    WaitingInMpi();
    ~WaitingInMpi();
    WaitingInMpi(const WaitingInMpi&) = delete;
    WaitingInMpi& operator=(const WaitingInMpi&) = delete;
};
// Requests nexar has completed so far (a counter).
uint64_t nonblocking_completions();

// A blocking wait of MPI's while nexar's nonblocking calls are in flight:
// `test(&done)` (an MPI_Test* call) until done, moving them along between
// tests (another rank's MPI_Wait may wait for this rank's part of a ring).
// MPI is asked again when nexar has completed a request, and every 64th
// round for its own requests (an MPI test costs more than a ring's poll).
// Once none of nexar's is left in flight, `block()` (the MPI_Wait* call)
// waits in MPI.
template <class Test, class Block>
int wait_progressing(const Test& test, const Block& block) {
    // The usual case of a program's point-to-point waits: nothing of
    // nexar's in flight, and nothing to note for the progress thread.
    if (!nonblocking_in_flight()) return block();
    {
        WaitingInMpi waiting;  // not while blocked in MPI below: the thread must then move the calls
        IdleBackoff idle;
        uint64_t asked_at = ~uint64_t(0);
        for (unsigned round = 0; nonblocking_in_flight(); ++round) {
            const bool moved = progress_nonblocking();
            const uint64_t completions = nonblocking_completions();
            if (completions != asked_at || round % 64 == 0) {
                asked_at = completions;
                int done = 0;
                const int rc = test(&done);
                if (rc != MPI_SUCCESS || done) return rc;
            }
            idle.after_round(moved);
        }
    }
    return block();
}

}  // namespace nexar
