#include "reduce/mpi_types.h"

#include "reduce/host_reduce.h"

#include <atomic>
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

MPI_Datatype g_float16 = MPI_DATATYPE_NULL;
MPI_Datatype g_bfloat16 = MPI_DATATYPE_NULL;
// [type: 0 float16, 1 bfloat16][op: sum, prod, min, max]
MPI_Op g_half_ops[2][4] = {{MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL},
                           {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL}};

// MPI user function: inout = in op inout, with nexar's host reducer.
template <DataType T, ReduceOp O>
void half_user_op(void* in, void* inout, int* len, MPI_Datatype*) {
    host_reduce(inout, inout, in, size_t(*len), T, O);
}

template <DataType T>
void create_ops(MPI_Op* ops) {
    PMPI_Op_create(&half_user_op<T, ReduceOp::sum>, 1, &ops[0]);
    PMPI_Op_create(&half_user_op<T, ReduceOp::prod>, 1, &ops[1]);
    PMPI_Op_create(&half_user_op<T, ReduceOp::min>, 1, &ops[2]);
    PMPI_Op_create(&half_user_op<T, ReduceOp::max>, 1, &ops[3]);
}

}  // namespace

void create_mpi_half_types() {
    if (g_float16 != MPI_DATATYPE_NULL) return;
    PMPI_Type_contiguous(2, MPI_BYTE, &g_float16);
    PMPI_Type_commit(&g_float16);
    PMPI_Type_contiguous(2, MPI_BYTE, &g_bfloat16);
    PMPI_Type_commit(&g_bfloat16);
    create_ops<DataType::f16>(g_half_ops[0]);
    create_ops<DataType::bf16>(g_half_ops[1]);
}

void free_mpi_half_types() {
    if (g_float16 == MPI_DATATYPE_NULL) return;
    PMPI_Type_free(&g_float16);
    PMPI_Type_free(&g_bfloat16);
    for (auto& row : g_half_ops)
        for (MPI_Op& op : row) PMPI_Op_free(&op);
}

MPI_Datatype mpi_float16_type() { return g_float16; }
MPI_Datatype mpi_bfloat16_type() { return g_bfloat16; }

MPI_Op passthrough_op(MPI_Datatype dt, MPI_Op op) {
    int t = (dt != MPI_DATATYPE_NULL && dt == g_float16) ? 0 : (dt != MPI_DATATYPE_NULL && dt == g_bfloat16) ? 1 : -1;
    if (t < 0) return op;
    ReduceOp r;
    if (!map_mpi_op(op, &r) || int(r) > int(ReduceOp::max)) return MPI_OP_NULL;
    return g_half_ops[t][int(r)];
}

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
    if (dt == MPI_DATATYPE_NULL) return false;
    if (dt == g_float16) return *out = DataType::f16, true;
    if (dt == g_bfloat16) return *out = DataType::bf16, true;
#ifdef MPIX_C_FLOAT16
    if (dt == MPIX_C_FLOAT16) return *out = DataType::f16, true;
#endif
#ifdef MPIX_BFLOAT16
    if (dt == MPIX_BFLOAT16) return *out = DataType::bf16, true;
#endif
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
