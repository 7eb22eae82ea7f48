// What reaches PMPI when the ring does not take a call: the call as it
// came (pass-through), or an eligible call that some rank cannot take
// (fallback: with device buffers staged through host memory where the MPI
// cannot take them), blocking or nonblocking.
#pragma once

#include <mpi.h>

#include <atomic>
#include <cstdint>

#include "call/call_plan.h"
#include "call/collective.h"
#include "runtime/comm_context.h"
#include "runtime/runtime.h"

namespace nexar {

// The op to hand MPI: nexar's own 16-bit float types need nexar's ops inside MPI.
MPI_Op pmpi_op(MPI_Datatype dt, MPI_Op op);

// The call to PMPI as it came; `counter` counts it.
int pass_through(const CollectiveCall& c, std::atomic<uint64_t>& counter);
// An eligible call the ring cannot take (fallback_calls).
int fall_back(Runtime& rt, CommContext& ctx, const LocalPlan& plan, const CollectiveCall& call);

// The call's PMPI_I* (MPI_Iallreduce and so on) on call.comm.
int post_pmpi_nonblocking(const CollectiveCall& call, MPI_Request* request);
// The same, counted as a pass-through.
int pass_through_nonblocking(const CollectiveCall& call, MPI_Request* request);

}  // namespace nexar
