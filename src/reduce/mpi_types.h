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

// 16-bit float datatypes for callers whose MPI has none (nexar.h exports
// them): 2-byte contiguous types created at MPI_Init, MPI_DATATYPE_NULL
// before.  MPI cannot reduce them by itself, so calls that pass through get
// an MPI_Op of nexar's own (passthrough_op).
void create_mpi_half_types();
void free_mpi_half_types();
MPI_Datatype mpi_float16_type();
MPI_Datatype mpi_bfloat16_type();
// The op to hand PMPI_Allreduce for `dt`: `op` itself, or for nexar's
// 16-bit types the matching user op (MPI_OP_NULL if there is none).
MPI_Op passthrough_op(MPI_Datatype dt, MPI_Op op);

}  // namespace nexar
