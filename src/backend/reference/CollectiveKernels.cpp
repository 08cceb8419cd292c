// Reference kernels of the collectives: MPI through the dist layer (src/dist/Comm.h).
#include "Reference.h"

#include "../../dist/Comm.h"

#include <symjax/Dist.h>
#include <symjax/ir/Node.h>

namespace sj::ref {
namespace {

using dist::detail::Call;
using dist::detail::Kind;

/// The call for node n on `count` elements of `dtype` per rank; checks the world is the node's.
Call collective_call(const Node& n, Kind kind, DType dtype, int64_t count) {
    const auto& a = n.attr<CollectiveAttrs>();
    std::string what = n.describe(2);
    SJ_CHECK(dist::size() == a.world, dist::DistError)
        << what << ": the graph was built for a world of " << a.world << " processes, this one has "
        << dist::size() << " (build the graph after "
        << "sj::dist::init(), in the processes that run it)";
    return Call{kind, a.reduce, int(a.root), dtype, count, what};
}

Call call_for(const KernelCtx& c, Kind kind, int64_t count) {
    return collective_call(c.node, kind, c.in[0].dtype(), count);
}

Array all_reduce_kernel(const KernelCtx& c) {
    Array out(c.out.dtype, c.out.shape);
    dist::detail::all_reduce(call_for(c, Kind::AllReduce, out.size()), c.in[0].raw(), out.raw());
    return out;
}

Array all_gather_kernel(const KernelCtx& c) {
    Array out(c.out.dtype, c.out.shape);
    dist::detail::all_gather(call_for(c, Kind::AllGather, c.in[0].size()), c.in[0].raw(),
                             out.raw());
    return out;
}

Array broadcast_from_kernel(const KernelCtx& c) {
    Array out = c.in[0].clone();
    dist::detail::broadcast(call_for(c, Kind::Broadcast, out.size()), out.raw());
    return out;
}

Array reduce_scatter_kernel(const KernelCtx& c) {
    Array out(c.out.dtype, c.out.shape);
    dist::detail::reduce_scatter(call_for(c, Kind::ReduceScatter, out.size()), c.in[0].raw(),
                                 out.raw());
    return out;
}

} // namespace

dist::detail::Call all_reduce_call(const Node& n, const TensorType& out) {
    return collective_call(n, Kind::AllReduce, out.dtype, numel(out.shape));
}

std::shared_ptr<dist::detail::Request> start_all_reduce(const KernelCtx& c, Array& out,
                                                        bool checked) {
    return dist::detail::start_all_reduce(call_for(c, Kind::AllReduce, out.size()), c.in[0].raw(),
                                          out.raw(), checked);
}

void register_collective_kernels(Kernel* t) {
    t[int(Op::AllReduce)] = all_reduce_kernel;
    t[int(Op::AllGather)] = all_gather_kernel;
    t[int(Op::BroadcastFrom)] = broadcast_from_kernel;
    t[int(Op::ReduceScatter)] = reduce_scatter_kernel;
}

} // namespace sj::ref
