#include "reduce/mpi_types.h"

#include <algorithm>

#include "reduce/host_reduce.h"

#include <cstdint>
#include <type_traits>
#include <vector>

namespace nexar {

namespace {

// The DataType holding an integer of `size` bytes.
DataType integer_of_size(size_t size, bool is_signed) {
    switch (size) {
        case 1: return is_signed ? DataType::i8 : DataType::u8;
        case 2: return is_signed ? DataType::i16 : DataType::u16;
        case 4: return is_signed ? DataType::i32 : DataType::u32;
        default: return is_signed ? DataType::i64 : DataType::u64;
    }
}
template <class T>
DataType integer_type() {
    return integer_of_size(sizeof(T), std::is_signed<T>::value);
}

// MPI-3.1 5.9.2 type classes, which decide the legal ops.
enum class TypeClass { c_integer, fortran_integer, floating, logical, byte, complex };

struct TypeEntry {
    MPI_Datatype mpi;
    DataType type;
    TypeClass cls;
};

std::vector<TypeEntry> g_types;
size_t g_max_item_bytes = SIZE_MAX;  // before init: no call is known to be small

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

// Adds a type whose size MPI knows (Fortran types depend on how the MPI and
// its compiler were configured); types of an unexpected size are left out.
void add_sized(MPI_Datatype dt, TypeClass cls) {
    if (dt == MPI_DATATYPE_NULL) return;
    int size = 0;
    if (PMPI_Type_size(dt, &size) != MPI_SUCCESS || size <= 0) return;
    switch (cls) {
        case TypeClass::fortran_integer:
        case TypeClass::logical:
            if (size == 1 || size == 2 || size == 4 || size == 8)
                g_types.push_back({dt, integer_of_size(size_t(size), cls != TypeClass::logical), cls});
            return;
        case TypeClass::floating:
            if (size == 4) g_types.push_back({dt, DataType::f32, cls});
            if (size == 8) g_types.push_back({dt, DataType::f64, cls});
            return;
        case TypeClass::complex:  // two floating parts
            if (size == 8) g_types.push_back({dt, DataType::f32, cls});
            if (size == 16) g_types.push_back({dt, DataType::f64, cls});
            return;
        default: return;
    }
}

bool op_allowed(TypeClass cls, ReduceOp op) {
    switch (cls) {
        case TypeClass::c_integer: return true;
        case TypeClass::fortran_integer:
            return op != ReduceOp::land && op != ReduceOp::lor && op != ReduceOp::lxor;
        case TypeClass::floating:
            return op == ReduceOp::sum || op == ReduceOp::prod || op == ReduceOp::min || op == ReduceOp::max;
        case TypeClass::logical: return op == ReduceOp::land || op == ReduceOp::lor || op == ReduceOp::lxor;
        case TypeClass::byte: return op == ReduceOp::band || op == ReduceOp::bor || op == ReduceOp::bxor;
        case TypeClass::complex: return op == ReduceOp::sum;  // PROD is not componentwise
    }
    return false;
}

}  // namespace

void init_mpi_types() {
    if (g_float16 != MPI_DATATYPE_NULL) return;
    PMPI_Type_contiguous(2, MPI_BYTE, &g_float16);
    PMPI_Type_commit(&g_float16);
    PMPI_Type_contiguous(2, MPI_BYTE, &g_bfloat16);
    PMPI_Type_commit(&g_bfloat16);
    create_ops<DataType::f16>(g_half_ops[0]);
    create_ops<DataType::bf16>(g_half_ops[1]);

    using C = TypeClass;
    g_types = {
        // The most common first: the table is scanned on every call.
        {MPI_FLOAT, DataType::f32, C::floating},
        {MPI_DOUBLE, DataType::f64, C::floating},
        {MPI_INT, integer_type<int>(), C::c_integer},
        {MPI_LONG, integer_type<long>(), C::c_integer},
        {MPI_INT64_T, DataType::i64, C::c_integer},
        {MPI_INT32_T, DataType::i32, C::c_integer},
        {MPI_UNSIGNED, integer_type<unsigned>(), C::c_integer},
        {MPI_UNSIGNED_LONG, integer_type<unsigned long>(), C::c_integer},
        {MPI_LONG_LONG_INT, integer_type<long long>(), C::c_integer},
        {MPI_LONG_LONG, integer_type<long long>(), C::c_integer},
        {MPI_UNSIGNED_LONG_LONG, integer_type<unsigned long long>(), C::c_integer},
        {MPI_SIGNED_CHAR, integer_type<signed char>(), C::c_integer},
        {MPI_UNSIGNED_CHAR, integer_type<unsigned char>(), C::c_integer},
        {MPI_SHORT, integer_type<short>(), C::c_integer},
        {MPI_UNSIGNED_SHORT, integer_type<unsigned short>(), C::c_integer},
        {MPI_INT8_T, DataType::i8, C::c_integer},
        {MPI_INT16_T, DataType::i16, C::c_integer},
        {MPI_UINT8_T, DataType::u8, C::c_integer},
        {MPI_UINT16_T, DataType::u16, C::c_integer},
        {MPI_UINT32_T, DataType::u32, C::c_integer},
        {MPI_UINT64_T, DataType::u64, C::c_integer},
        {MPI_AINT, integer_type<MPI_Aint>(), C::c_integer},
        {MPI_OFFSET, integer_type<MPI_Offset>(), C::c_integer},
        {MPI_COUNT, integer_type<MPI_Count>(), C::c_integer},
        {MPI_C_BOOL, DataType::u8, C::logical},
        {MPI_BYTE, DataType::u8, C::byte},
        {g_float16, DataType::f16, C::floating},
        {g_bfloat16, DataType::bf16, C::floating},
    };
    static_assert(sizeof(bool) == 1, "MPI_C_BOOL is one byte here");
#ifdef MPIX_C_FLOAT16
    g_types.push_back({MPIX_C_FLOAT16, DataType::f16, C::floating});
#endif
#ifdef MPIX_BFLOAT16
    g_types.push_back({MPIX_BFLOAT16, DataType::bf16, C::floating});
#endif
    add_sized(MPI_C_FLOAT_COMPLEX, C::complex);
    add_sized(MPI_C_DOUBLE_COMPLEX, C::complex);
    // Fortran types (MPI knows their configured sizes).
    add_sized(MPI_INTEGER, C::fortran_integer);
    add_sized(MPI_INTEGER1, C::fortran_integer);
    add_sized(MPI_INTEGER2, C::fortran_integer);
    add_sized(MPI_INTEGER4, C::fortran_integer);
    add_sized(MPI_INTEGER8, C::fortran_integer);
    add_sized(MPI_REAL, C::floating);
    add_sized(MPI_DOUBLE_PRECISION, C::floating);
    add_sized(MPI_REAL4, C::floating);
    add_sized(MPI_REAL8, C::floating);
    add_sized(MPI_LOGICAL, C::logical);
    add_sized(MPI_COMPLEX, C::complex);
    add_sized(MPI_DOUBLE_COMPLEX, C::complex);
    g_max_item_bytes = 0;
    for (const TypeEntry& e : g_types)
        g_max_item_bytes = std::max(g_max_item_bytes, (e.cls == C::complex ? 2 : 1) * datatype_size(e.type));
}

size_t max_ring_item_bytes() { return g_max_item_bytes; }

void free_mpi_types() {
    if (g_float16 == MPI_DATATYPE_NULL) return;
    g_types.clear();
    g_max_item_bytes = SIZE_MAX;
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

bool map_mpi_call(MPI_Datatype dt, MPI_Op op, RingElement* out) {
    ReduceOp r;
    if (dt == MPI_DATATYPE_NULL || !map_mpi_op(op, &r)) return false;
    for (const TypeEntry& e : g_types) {
        if (e.mpi != dt) continue;
        if (!op_allowed(e.cls, r) || !op_supported(e.type, r)) return false;
        out->type = e.type;
        out->op = r;
        out->per_item = e.cls == TypeClass::complex ? 2 : 1;
        return true;
    }
    return false;
}

bool mpi_forbids(MPI_Datatype dt, MPI_Op op) {
    ReduceOp r;
    if (dt == MPI_DATATYPE_NULL || !map_mpi_op(op, &r)) return false;
    for (const TypeEntry& e : g_types)
        if (e.mpi == dt)  // complex PROD is MPI's, though not the ring's
            return !op_allowed(e.cls, r) && !(e.cls == TypeClass::complex && r == ReduceOp::prod);
    return false;
}

bool known_mpi_datatype(MPI_Datatype dt) {
    if (dt == MPI_DATATYPE_NULL) return false;
    for (const TypeEntry& e : g_types)
        if (e.mpi == dt) return true;
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
