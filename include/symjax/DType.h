// Element types of tensors and arrays, and the helpers that map them to C++ types.
#pragma once

#include <cstdint>
#include <string>

namespace sj {

/// Element type of a tensor. f16/bf16/i8 are not yet supported (see docs/dtypes.md).
enum class DType : uint8_t { Bool, U8, I32, I64, U32, F32, F64 };

inline constexpr DType boolean = DType::Bool;
inline constexpr DType u8 = DType::U8;
inline constexpr DType i32 = DType::I32;
inline constexpr DType i64 = DType::I64;
inline constexpr DType u32 = DType::U32;
inline constexpr DType f32 = DType::F32;
inline constexpr DType f64 = DType::F64;

inline constexpr int kNumDTypes = 7;

/// "f32", "i64", ...
const char* dtype_name(DType t);
/// Parses a dtype_name back; throws TypeError on an unknown name.
DType dtype_from_name(const std::string& s);
/// Bytes per element.
int dtype_size(DType t);
inline bool is_float(DType t) { return t == DType::F32 || t == DType::F64; }
inline bool is_int(DType t) {
    return t == DType::U8 || t == DType::I32 || t == DType::I64 || t == DType::U32;
}
inline bool is_signed(DType t) { return is_float(t) || t == DType::I32 || t == DType::I64; }
/// The type both operands of a mixed binary op are cast to: the wider along
/// bool < u8 < i32 < u32 < i64 < f32 < f64.
DType promote(DType a, DType b);

/// C++ storage type of each dtype: CType<DType::F32> is float. bool is stored as uint8_t.
template <DType> struct CTypeOf;
template <> struct CTypeOf<DType::Bool> { using type = uint8_t; };
template <> struct CTypeOf<DType::U8> { using type = uint8_t; };
template <> struct CTypeOf<DType::I32> { using type = int32_t; };
template <> struct CTypeOf<DType::I64> { using type = int64_t; };
template <> struct CTypeOf<DType::U32> { using type = uint32_t; };
template <> struct CTypeOf<DType::F32> { using type = float; };
template <> struct CTypeOf<DType::F64> { using type = double; };
template <DType D> using CType = typename CTypeOf<D>::type;

/// dtype_of<float>() == f32.
template <class T> constexpr DType dtype_of();
template <> constexpr DType dtype_of<bool>() { return DType::Bool; }
template <> constexpr DType dtype_of<uint8_t>() { return DType::U8; }
template <> constexpr DType dtype_of<int32_t>() { return DType::I32; }
template <> constexpr DType dtype_of<int64_t>() { return DType::I64; }
template <> constexpr DType dtype_of<uint32_t>() { return DType::U32; }
template <> constexpr DType dtype_of<float>() { return DType::F32; }
template <> constexpr DType dtype_of<double>() { return DType::F64; }

/// Calls f(Tag<D>{}) for the runtime dtype t, where Tag<D>::type is the storage type.
template <DType D> struct DTag {
    static constexpr DType dtype = D;
    using type = CType<D>;
};
template <class F> decltype(auto) dispatch(DType t, F&& f) {
    switch (t) {
    case DType::Bool: return f(DTag<DType::Bool>{});
    case DType::U8: return f(DTag<DType::U8>{});
    case DType::I32: return f(DTag<DType::I32>{});
    case DType::I64: return f(DTag<DType::I64>{});
    case DType::U32: return f(DTag<DType::U32>{});
    case DType::F32: return f(DTag<DType::F32>{});
    case DType::F64: return f(DTag<DType::F64>{});
    }
    return f(DTag<DType::F32>{}); // unreachable: -Werror=switch covers every enumerator
}

} // namespace sj
