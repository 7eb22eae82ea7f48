// Mapping from MPI's predefined datatypes and ops to the ring's own.
#pragma once

#include <mpi.h>

#include "reduce/types.h"

namespace nexar {

// True when `dt` is a predefined datatype the ring reduces itself; derived,
// pair (MINLOC/MAXLOC) and unknown types return false and pass through.
bool map_mpi_datatype(MPI_Datatype dt, DataType* out);
// True for the predefined commutative ops the ring implements.
bool map_mpi_op(MPI_Op op, ReduceOp* out);

}  // namespace nexar
