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
#include "call/mpi_staging.h"
#include "runtime/comm_context.h"
#include "runtime/job_report.h"
#include "runtime/runtime.h"

namespace nexar {

// The op to hand MPI: nexar's own 16-bit float types need nexar's ops inside MPI.
MPI_Op pmpi_op(MPI_Datatype dt, MPI_Op op);

// NEXAR_REPORT (runtime/job_report.h), where it is on: a call the MPI took
// (called once the MPI accepted it: a call MPI refuses is in the stats but
// not in the report), sized as the learner sizes calls.  (Asks MPI for the
// type's and the communicator's sizes: only while a report is kept.)
void report_mpi_call(const CollectiveCall& c, CallMode mode);

// The call to PMPI as it came; `counter` counts it, and NEXAR_REPORT too
// where `report` (false: the caller reports it).
int pass_through(const CollectiveCall& c, std::atomic<uint64_t>& counter, bool report = true);

// The MPI's path for a call, safe for every memory kind: the call to PMPI as
// it came, or, where device buffers would reach an MPI that does not know
// CUDA (Runtime::stages_device_buffers), with them staged through host
// memory (staged_calls).  `counter` counts it either way.  Each rank decides
// for itself: every rank makes the same MPI call.  Managed memory goes as
// it is (the MPI can touch it).  rt may be null (not started).
int mpi_path(Runtime* rt, const CollectiveCall& c, std::atomic<uint64_t>& counter, bool report = true);

// The call's PMPI_I* (MPI_Iallreduce and so on) on call.comm.
int post_pmpi_nonblocking(const CollectiveCall& call, MPI_Request* request);
// The same, counted as a pass-through.
int pass_through_nonblocking(const CollectiveCall& call, MPI_Request* request);

}  // namespace nexar
