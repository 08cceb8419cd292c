// dtype names, sizes and promotion.
#include <symjax/DType.h>
#include <symjax/Error.h>

namespace sj {

const char* dtype_name(DType t) {
    switch (t) {
    case DType::Bool: return "bool";
    case DType::U8: return "u8";
    case DType::I32: return "i32";
    case DType::I64: return "i64";
    case DType::U32: return "u32";
    case DType::F32: return "f32";
    case DType::F64: return "f64";
    }
    return "?";
}

DType dtype_from_name(const std::string& s) {
    for (int i = 0; i < kNumDTypes; ++i)
        if (s == dtype_name(DType(i))) return DType(i);
    SJ_THROW(TypeError) << "unknown dtype '" << s << "' (expected bool, u8, i32, i64, u32, f32, f64)";
}

int dtype_size(DType t) {
    return dispatch(t, [](auto tag) { return int(sizeof(typename decltype(tag)::type)); });
}

DType promote(DType a, DType b) {
    auto rank = [](DType t) {
        switch (t) {
        case DType::Bool: return 0;
        case DType::U8: return 1;
        case DType::I32: return 2;
        case DType::U32: return 3;
        case DType::I64: return 4;
        case DType::F32: return 5;
        case DType::F64: return 6;
        }
        return 0;
    };
    return rank(a) >= rank(b) ? a : b;
}

} // namespace sj
