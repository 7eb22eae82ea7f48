#include "reduce/mpi_types.h"

#include <climits>
#include <cstdint>
#include <type_traits>

namespace nexar {

namespace {

// The DataType holding a C integer type T: chosen by size and signedness so
// that `long` maps right on every ABI.
template <class T>
constexpr DataType integer_type() {
    static_assert(std::is_integral<T>::value, "integers only");
    if (std::is_signed<T>::value)
        return sizeof(T) == 1 ? DataType::i8 : sizeof(T) == 2 ? DataType::i16 : sizeof(T) == 4 ? DataType::i32 : DataType::i64;
    return sizeof(T) == 1 ? DataType::u8 : sizeof(T) == 2 ? DataType::u16 : sizeof(T) == 4 ? DataType::u32 : DataType::u64;
}

}  // namespace

bool map_mpi_datatype(MPI_Datatype dt, DataType* out) {
    // Handles are compared at run time: in Open MPI they are addresses of
    // library globals, so no switch is possible.
    struct Entry { MPI_Datatype mpi; DataType type; };
    const Entry table[] = {
        {MPI_SIGNED_CHAR, integer_type<signed char>()},
        {MPI_UNSIGNED_CHAR, integer_type<unsigned char>()},
        {MPI_SHORT, integer_type<short>()},
        {MPI_UNSIGNED_SHORT, integer_type<unsigned short>()},
        {MPI_INT, integer_type<int>()},
        {MPI_UNSIGNED, integer_type<unsigned>()},
        {MPI_LONG, integer_type<long>()},
        {MPI_UNSIGNED_LONG, integer_type<unsigned long>()},
        {MPI_LONG_LONG_INT, integer_type<long long>()},
        {MPI_LONG_LONG, integer_type<long long>()},
        {MPI_UNSIGNED_LONG_LONG, integer_type<unsigned long long>()},
        {MPI_INT8_T, DataType::i8},
        {MPI_INT16_T, DataType::i16},
        {MPI_INT32_T, DataType::i32},
        {MPI_INT64_T, DataType::i64},
        {MPI_UINT8_T, DataType::u8},
        {MPI_UINT16_T, DataType::u16},
        {MPI_UINT32_T, DataType::u32},
        {MPI_UINT64_T, DataType::u64},
        {MPI_FLOAT, DataType::f32},
        {MPI_DOUBLE, DataType::f64},
    };
    for (const Entry& e : table)
        if (e.mpi == dt) return *out = e.type, true;
    return false;
}

bool map_mpi_op(MPI_Op op, ReduceOp* out) {
    struct Entry { MPI_Op mpi; ReduceOp op; };
    const Entry table[] = {
        {MPI_SUM, ReduceOp::sum},   {MPI_PROD, ReduceOp::prod}, {MPI_MIN, ReduceOp::min},
        {MPI_MAX, ReduceOp::max},   {MPI_BAND, ReduceOp::band}, {MPI_BOR, ReduceOp::bor},
        {MPI_BXOR, ReduceOp::bxor}, {MPI_LAND, ReduceOp::land}, {MPI_LOR, ReduceOp::lor},
        {MPI_LXOR, ReduceOp::lxor},
    };
    for (const Entry& e : table)
        if (e.mpi == op) return *out = e.op, true;
    return false;
}

}  // namespace nexar
