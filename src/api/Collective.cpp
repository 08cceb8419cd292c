// The host-side collectives of <symjax/Dist.h>: the same calls as the graph ops' kernels, on
// arrays, run at once.
#include "../dist/Comm.h"

#include <symjax/Dist.h>

namespace sj::dist {
namespace {

using detail::Call;
using detail::Kind;

void check_reduce(const char* fn, const Array& x, ReduceOp op) {
    SJ_CHECK(x.defined(), InputError) << "dist::" << fn << ": the array is undefined";
    SJ_CHECK(x.dtype() != DType::Bool, TypeError)
        << "dist::" << fn << ": reductions take numeric arrays, got " << x.type_str();
    SJ_CHECK(op != ReduceOp::Mean || is_float(x.dtype()), TypeError)
        << "dist::" << fn << " mean needs a float array (f32 or f64), got " << x.type_str()
        << "; use sum and divide";
}

std::string what(const char* fn, const Array& x) {
    return std::string("dist::") + fn + "(array " + x.type_str() + ")";
}

} // namespace

Array all_reduce(const Array& x, ReduceOp op) {
    check_reduce("all_reduce", x, op);
    Array out(x.dtype(), x.shape());
    detail::all_reduce(Call{Kind::AllReduce, op, 0, x.dtype(), x.size(), what("all_reduce", x)},
                       x.raw(), out.raw());
    return out;
}

Array all_gather(const Array& x) {
    SJ_CHECK(x.defined(), InputError) << "dist::all_gather: the array is undefined";
    Shape s = x.shape();
    if (s.empty())
        s = {int64_t(size())};
    else
        s[0] *= size();
    Array out(x.dtype(), s);
    detail::all_gather(
        Call{Kind::AllGather, ReduceOp::Sum, 0, x.dtype(), x.size(), what("all_gather", x)},
        x.raw(), out.raw());
    return out;
}

Array broadcast(const Array& x, int root) {
    SJ_CHECK(x.defined(), InputError) << "dist::broadcast: the array is undefined";
    Array out = x.clone();
    detail::broadcast(
        Call{Kind::Broadcast, ReduceOp::Sum, root, x.dtype(), x.size(), what("broadcast", x)},
        out.raw());
    return out;
}

Array reduce_scatter(const Array& x, ReduceOp op) {
    check_reduce("reduce_scatter", x, op);
    int n = size();
    SJ_CHECK(x.rank() >= 1 && x.shape()[0] % n == 0, ShapeError)
        << "dist::reduce_scatter: splits axis 0 of the array " << x.type_str() << " into " << n
        << " equal blocks (one per rank)";
    Shape s = x.shape();
    s[0] /= n;
    Array out(x.dtype(), s);
    detail::reduce_scatter(
        Call{Kind::ReduceScatter, op, 0, x.dtype(), out.size(), what("reduce_scatter", x)}, x.raw(),
        out.raw());
    return out;
}

} // namespace sj::dist
