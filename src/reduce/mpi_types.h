// Mapping from MPI's predefined datatypes and ops to the ring's own.
#pragma once

#include <mpi.h>

#include <cstddef>

#include "reduce/types.h"

namespace nexar {

// What the ring does for one (datatype, op) pair of an MPI_Allreduce.
struct RingElement {
    DataType type = DataType::i8;  // element type the ring reduces
    ReduceOp op = ReduceOp::sum;
    size_t per_item = 1;           // ring elements per MPI item (2 for complex SUM)
};

// True when MPI defines `op` on `dt` and the ring implements it.  MPI's rules
// per type class (MPI-3.1, 5.9.2): C integers take every op; Fortran
// integers the arithmetic and bitwise ones; floating types SUM, PROD, MIN,
// MAX; logical types (MPI_C_BOOL, MPI_LOGICAL) LAND, LOR, LXOR; MPI_BYTE the
// bitwise ones; complex types SUM (complex PROD passes through).  Everything
// else - derived and pair types, user ops, MPI_REPLACE/MPI_NO_OP, an op MPI
// would reject - returns false and goes to PMPI, which reports any error.
// Valid after init_mpi_types().
bool map_mpi_call(MPI_Datatype dt, MPI_Op op, RingElement* out);
// The largest item (bytes) any call map_mpi_call accepts can have: a call
// of `count` items with count * this below the threshold is small whatever
// its datatype, which lets small calls skip the table.  SIZE_MAX before
// init_mpi_types().
size_t max_ring_item_bytes();
// True when MPI's rules forbid `op` on `dt`, both predefined and in the
// tables (MPI_LAND on MPI_FLOAT): the call is erroneous.
bool mpi_forbids(MPI_Datatype dt, MPI_Op op);
// True when `dt` is one of the predefined types in the table (any op).
bool known_mpi_datatype(MPI_Datatype dt);
// True for the predefined ops the ring implements (any datatype).
bool map_mpi_op(MPI_Op op, ReduceOp* out);

// Builds the datatype table (Fortran sizes are asked of MPI) and creates
// nexar's 16-bit float datatypes and their ops.  Call after MPI_Init.
void init_mpi_types();
void free_mpi_types();

// 16-bit float datatypes for callers whose MPI has none (nexar.h exports
// them): 2-byte contiguous types, MPI_DATATYPE_NULL before init_mpi_types().
// MPI cannot reduce them by itself, so calls that pass through get an MPI_Op
// of nexar's own (passthrough_op).
MPI_Datatype mpi_float16_type();
MPI_Datatype mpi_bfloat16_type();
// The op to hand PMPI_Allreduce for `dt`: `op` itself, or for nexar's
// 16-bit types the matching user op (MPI_OP_NULL if there is none).
MPI_Op passthrough_op(MPI_Datatype dt, MPI_Op op);

}  // namespace nexar
