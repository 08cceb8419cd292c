// The dist layer's collectives on raw buffers: what the reference kernels and the host-side
// functions of <symjax/Dist.h> call. MPI stays inside Comm.cpp.
#pragma once

#include <symjax/DType.h>
#include <symjax/Dist.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

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

/// A posted all_reduce (Note [Collective overlap] in src/compiler/ExecPlan.cpp).
struct Request;
/// Checks in one exchange that every rank is about to run the same collectives `calls`, in
/// order (Note [Collective signatures]): the all_reduces a plan posts without waiting. Throws
/// DistError naming each rank's calls when they differ. `what` names the program.
void check_collectives(const std::vector<Call>& calls, const std::string& what);
/// Posts all_reduce(c, src, dst) and returns before it completes (dst must stay alive until
/// finish()). Without MPI, or for more than INT_MAX elements, it completes before returning.
/// `checked`: its signature was part of a check_collectives already.
std::shared_ptr<Request> start_all_reduce(const Call& c, const void* src, void* dst,
                                          bool checked = false);
/// Lets MPI move a posted collective on; true when it is complete (then dst holds the result).
bool progress(Request& r);
/// Waits for a posted collective under the timeout (Note [Collective timeouts]); then dst holds
/// the result. Throws DistError as all_reduce does.
void finish(Request& r);

/// Number of collectives this process has run (their sequence number in messages).
uint64_t collectives_run();

} // namespace sj::dist::detail
