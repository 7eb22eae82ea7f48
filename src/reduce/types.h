// Element types and reduction operations the ring knows, independent of MPI.
#pragma once

#include <cstddef>

namespace nexar {

// f16 is IEEE binary16, bf16 is bfloat16; both reduce in float and round
// to nearest even (reduce/half.h).
enum class DataType { i8, i16, i32, i64, u8, u16, u32, u64, f32, f64, f16, bf16, count_ };
enum class ReduceOp { sum, prod, min, max, band, bor, bxor, land, lor, lxor, count_ };

size_t datatype_size(DataType t);
const char* datatype_name(DataType t);
const char* reduce_op_name(ReduceOp op);
bool is_floating(DataType t);
// Bitwise and logical ops are defined for integer types only (as in MPI).
bool op_supported(DataType t, ReduceOp op);

}  // namespace nexar
