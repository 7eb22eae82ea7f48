// An MPI that does not know CUDA, for the emulated GPU's tests: device
// buffers that reach the MPI's collectives fail the test (mpi_device_trap.cc).
#pragma once

#include <mpi.h>

#include "memory/device_api.h"

// From now on, a collective that reaches the MPI with a buffer `api` says
// is device memory aborts the job with a FAIL line.
void arm_device_trap(const nexar_device_api* api);
