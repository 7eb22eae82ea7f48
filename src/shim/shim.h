// Shared by the C and Fortran entry points.
#pragma once

#include <mpi.h>

#include <exception>

#include "core/collective.h"
#include "core/log.h"
#include "core/runtime.h"

namespace nexar {

// Starts the runtime after MPI is initialized; never throws, never fails the job.
void shim_start_runtime();
// Stops it before MPI is finalized; never throws.
void shim_stop_runtime();

// Runs `dispatch` (core/collective.h); an internal error (only allocation
// failures throw) goes to the communicator's error handler, as any MPI
// error would, and never crosses into the caller.
template <class Dispatch>
int shim_guard(const char* name, MPI_Comm comm, const Dispatch& dispatch) {
    try {
        return dispatch();
    } catch (const std::exception& e) {
        NEXAR_ERROR("%s: internal error (%s)", name, e.what());
    } catch (...) {
        NEXAR_ERROR("%s: internal error", name);
    }
    return raise_mpi_error(comm, MPI_ERR_INTERN);
}
inline int shim_intercept(const CollectiveCall& call) {
    return shim_guard(call.name, call.comm, [&] { return intercept_collective(call); });
}

}  // namespace nexar
