// The dist layer's collectives on raw buffers: what the reference kernels and the host-side
// functions of <symjax/Dist.h> call. MPI stays inside Comm.cpp.
#pragma once

#include <symjax/DType.h>
#include <symjax/Dist.h>

#include <cstdint>
#include <string>

namespace sj::dist::detail {

/// What a collective is, for the cross-rank signature check and for messages.
enum class Kind : uint8_t { AllReduce, AllGather, Broadcast, ReduceScatter, Barrier };
/// "all_reduce", "all_gather", "broadcast", "reduce_scatter", "barrier".
const char* kind_name(Kind k);

/// One collective call: `count` elements of `dtype` per rank (all_gather: what each rank sends;
/// reduce_scatter: what each rank receives). `what` names it in messages ("all_reduce(grads)").
struct Call {
    Kind kind = Kind::AllReduce;
    ReduceOp reduce = ReduceOp::Sum;
    int root = 0;
    DType dtype = DType::F32;
    int64_t count = 0;
    std::string what;
};

/// dst[i] = reduce over ranks of src[i], i < count. src == dst is allowed.
void all_reduce(const Call& c, const void* src, void* dst);
/// dst = the ranks' src (count elements each) one after the other, in rank order.
void all_gather(const Call& c, const void* src, void* dst);
/// buf = root's buf.
void broadcast(const Call& c, void* buf);
/// dst (count elements) = block rank() of the reduction of src (size() * count elements).
void reduce_scatter(const Call& c, const void* src, void* dst);

/// Number of collectives this process has run (their sequence number in messages).
uint64_t collectives_run();

} // namespace sj::dist::detail
