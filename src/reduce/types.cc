#include "reduce/types.h"

namespace nexar {

size_t datatype_size(DataType t) {
    switch (t) {
        case DataType::i8: case DataType::u8: return 1;
        case DataType::i16: case DataType::u16: case DataType::f16: case DataType::bf16: return 2;
        case DataType::i32: case DataType::u32: case DataType::f32: return 4;
        case DataType::i64: case DataType::u64: case DataType::f64: return 8;
        default: return 0;
    }
}

const char* datatype_name(DataType t) {
    static const char* const names[] = {"int8", "int16", "int32", "int64", "uint8",
                                        "uint16", "uint32", "uint64", "float", "double", "float16", "bfloat16"};
    size_t i = static_cast<size_t>(t);
    return i < sizeof names / sizeof names[0] ? names[i] : "?";
}

const char* reduce_op_name(ReduceOp op) {
    static const char* const names[] = {"sum", "prod", "min", "max", "band", "bor", "bxor", "land", "lor", "lxor"};
    size_t i = static_cast<size_t>(op);
    return i < sizeof names / sizeof names[0] ? names[i] : "?";
}

bool is_floating(DataType t) {
    return t == DataType::f32 || t == DataType::f64 || t == DataType::f16 || t == DataType::bf16;
}

bool op_supported(DataType t, ReduceOp op) {
    if (datatype_size(t) == 0) return false;
    switch (op) {
        case ReduceOp::sum: case ReduceOp::prod: case ReduceOp::min: case ReduceOp::max: return true;
        case ReduceOp::band: case ReduceOp::bor: case ReduceOp::bxor:
        case ReduceOp::land: case ReduceOp::lor: case ReduceOp::lxor: return !is_floating(t);
        default: return false;
    }
}

}  // namespace nexar
