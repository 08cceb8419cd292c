// The primitive op enum and its traits, generated from Ops.def.
#pragma once

#include <cstdint>

namespace sj {

/// Traits are data: passes read these bits, never lists of op names.
enum OpTrait : uint32_t {
    kLeaf = 1u << 0,
    kElementwise = 1u << 1,
    kCommutative = 1u << 2,
    kAssociative = 1u << 3,
    kCompare = 1u << 4,
    kReduce = 1u << 5,
    kMovement = 1u << 6,
    kIndexing = 1u << 7,
    kLibrary = 1u << 8,
    kRandom = 1u << 9,
    kPure = 1u << 10,
    kTranscendental = 1u << 11,
    kWindow = 1u << 12, // sliding-window ops (conv, pool and their backward ops): library calls
    kBoolResult = 1u << 13, // the result is bool whatever the inputs' dtype (compares, isnan)
    kRegion = 1u << 14, // structured ops (scan, while_loop, cond): RegionAttrs, one node per result
};

enum class Op : uint16_t {
#define SJ_OP(Name, str, arity, traits, dtypes, shape_only, fusion, attrs, min_in, max_in) Name,
#include <symjax/ir/Ops.def>
};

inline constexpr int kNumOps = 0
#define SJ_OP(Name, str, arity, traits, dtypes, shape_only, fusion, attrs, min_in, max_in) +1
#include <symjax/ir/Ops.def>
    ;

/// "add", "reduce_sum", ...
const char* op_name(Op op);
/// Number of inputs, or -1 for variadic ops.
int op_arity(Op op);
uint32_t op_traits(Op op);
inline bool has_trait(Op op, OpTrait t) { return (op_traits(op) & t) != 0; }

} // namespace sj
