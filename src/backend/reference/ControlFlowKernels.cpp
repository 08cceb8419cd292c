// Running scan, while_loop and cond: the loop drivers every backend uses, given a way to run a
// body (Note [Structured ops] in src/ops/ControlFlow.cpp), and the reference kernels.
#include "Reference.h"

#include <symjax/Interrupt.h>
#include <symjax/ir/ControlFlow.h>
#include <symjax/ir/Node.h>

#include <cstring>
#include <unordered_map>

namespace sj::ref {

namespace {

using detail::Region;
using detail::RegionKind;

int64_t row_bytes(const Array& a) {
    return a.shape().empty() || a.shape()[0] == 0 ? 0 : a.nbytes() / a.shape()[0];
}

/// Writes `v` into row t of `dst`.
void put_row(Array& dst, int64_t t, const Array& v, const Region& r, int k) {
    SJ_ASSERT(v.dtype() == dst.dtype() && v.nbytes() == row_bytes(dst))
        << r.name << ": " << r.result_str(k) << " row is " << v.type_str() << ", the result is "
        << dst.type_str();
    if (v.nbytes() > 0)
        std::memcpy(static_cast<char*>(dst.raw()) + t * row_bytes(dst), v.raw(),
                    size_t(v.nbytes()));
}

// Note [Loop rows in place]
// A scan writes each step's stacked outputs into row t of their results and, when a gradient
// needs it, the carry each step receives into row t of the carry history. Copying them there
// after the body ran cost an LSTM's forward step a quarter of a megabyte of memcpy. So the body
// is given the rows as destinations: stacked output k's is row t of its result, and a new
// carry's is row t+1 (the next step's t) of its history, so that the next step reads its carry
// from the history where the copy would have put it. The cpu backend computes a result into its
// destination when the result is a buffer the body writes (a kernel's or a library call's
// output); a result that is a view, an input or a reference kernel's array is copied as before,
// and so is everything on the reference backend. Whether a value is already in its row is
// checked by address, never assumed.

/// Whether v is row t of dst, in place.
bool in_row(const Array& v, const Array& dst, int64_t t) {
    return v.defined() && dst.defined() && v.nbytes() == row_bytes(dst) && v.shares_buffer(dst) &&
           v.raw() == static_cast<const char*>(dst.raw()) + t * row_bytes(dst);
}

std::vector<Array> slice(const std::vector<Array>& in, int begin, int count) {
    return {in.begin() + begin, in.begin() + begin + count};
}

std::vector<Array> run_scan(const Region& r, const std::vector<Array>& in,
                            const std::vector<TensorType>& types, const std::vector<bool>& wanted,
                            const BodyRunner& run_body) {
    const int c = r.carries, o = r.outputs;
    const int64_t length = r.sequences > 0 ? in[size_t(c)].shape()[0] : r.length;
    std::vector<Array> res(types.size());
    for (int k = c; k < 2 * c + o; ++k)
        if (wanted[size_t(k)])
            res[size_t(k)] = Array::uninitialized(types[size_t(k)].dtype, types[size_t(k)].shape);
    std::vector<Array> carry = slice(in, 0, c);
    std::vector<Array> captured = slice(in, r.captured_begin(), r.captured);
    std::vector<Array> args, dests(size_t(c + o));
    for (int64_t s = 0; s < length; ++s) {
        if (poll_interrupt())
            SJ_THROW(Interrupted) << r.name << ": interrupted after " << s << " of " << length
                                  << " steps; no variable was changed";
        const int64_t t = r.reverse ? length - 1 - s : s, next = r.reverse ? t - 1 : t + 1;
        for (int i = 0; i < c; ++i) {
            Array& hist = res[size_t(c + o + i)];
            if (wanted[size_t(c + o + i)] && !in_row(carry[size_t(i)], hist, t))
                put_row(hist, t, carry[size_t(i)], r, c + o + i);
            // the new carry's place (Note [Loop rows in place]): the next step's history row
            dests[size_t(i)] =
                wanted[size_t(c + o + i)] && s + 1 < length ? hist.row(next) : Array();
        }
        for (int i = 0; i < o; ++i)
            dests[size_t(c + i)] = wanted[size_t(c + i)] ? res[size_t(c + i)].row(t) : Array();
        args = carry;
        for (int q = 0; q < r.sequences; ++q)
            args.push_back(in[size_t(c + q)].row(t)); // a view, no copy
        args.insert(args.end(), captured.begin(), captured.end());
        std::vector<Array> out = run_body(0, args, &dests);
        SJ_ASSERT(out.size() == size_t(c + o))
            << r.name << ": the body returned " << out.size() << " values";
        for (int i = 0; i < c; ++i)
            carry[size_t(i)] = std::move(out[size_t(i)]);
        for (int i = 0; i < o; ++i)
            if (wanted[size_t(c + i)] && !in_row(out[size_t(c + i)], res[size_t(c + i)], t))
                put_row(res[size_t(c + i)], t, out[size_t(c + i)], r, c + i);
    }
    for (int i = 0; i < c; ++i)
        res[size_t(i)] = carry[size_t(i)];
    return res;
}

std::vector<Array> run_while(const Region& r, const std::vector<Array>& in,
                             const std::vector<TensorType>& types, const std::vector<bool>& wanted,
                             const BodyRunner& run_body) {
    const int c = r.carries;
    std::vector<Array> res(types.size());
    for (size_t k = size_t(c) + 1; k < types.size(); ++k)
        if (wanted[k])
            res[k] = Array(types[k].dtype, types[k].shape); // rows past the trip count stay 0
    std::vector<Array> carry = slice(in, 0, c);
    std::vector<Array> captured = slice(in, r.captured_begin(), r.captured);
    std::vector<Array> captured2 = slice(in, r.captured2_begin(), r.captured2);
    int64_t trips = 0;
    std::vector<Array> args;
    while (r.max_iterations < 0 || trips < r.max_iterations) {
        if (poll_interrupt())
            SJ_THROW(Interrupted) << r.name << ": interrupted after " << trips
                                  << " iterations; no variable was changed";
        args = carry;
        args.insert(args.end(), captured2.begin(), captured2.end());
        std::vector<Array> go = run_body(1, args, nullptr);
        SJ_ASSERT(go.size() == 1 && go[0].dtype() == DType::Bool) << r.name << ": condition result";
        if (!go[0].item<bool>())
            break;
        for (int i = 0; i < c; ++i)
            if (r.max_iterations >= 0 && wanted[size_t(c + 1 + i)])
                put_row(res[size_t(c + 1 + i)], trips, carry[size_t(i)], r, c + 1 + i);
        args = carry;
        args.insert(args.end(), captured.begin(), captured.end());
        std::vector<Array> out = run_body(0, args, nullptr);
        SJ_ASSERT(out.size() == size_t(c))
            << r.name << ": the body returned " << out.size() << " values";
        carry = std::move(out);
        ++trips;
    }
    for (int i = 0; i < c; ++i)
        res[size_t(i)] = carry[size_t(i)];
    res[size_t(c)] = Array::scalar<int64_t>(trips);
    return res;
}

std::vector<Array> run_cond(const Region& r, const std::vector<Array>& in,
                            const BodyRunner& run_body) {
    const bool take_true = in[0].item<bool>();
    std::vector<Array> args = slice(in, 1, r.carries);
    std::vector<Array> cap = take_true ? slice(in, r.captured_begin(), r.captured)
                                       : slice(in, r.captured2_begin(), r.captured2);
    args.insert(args.end(), cap.begin(), cap.end());
    std::vector<Array> out = run_body(take_true ? 0 : 1, args, nullptr);
    SJ_ASSERT(out.size() == size_t(r.outputs))
        << r.name << ": the branch returned " << out.size() << " values";
    return out;
}

Array region_kernel(const KernelCtx& c) {
    const auto& a = c.attr<RegionAttrs>();
    std::vector<bool> wanted(size_t(a.region->num_results()), false);
    wanted[size_t(a.output)] = true;
    BodyRunner run = [&](int which, const std::vector<Array>& args, const std::vector<Array>*) {
        return eval_body(c.node, which, args, c.counter);
    };
    return run_region(c.node, c.in, wanted, run)[size_t(a.output)];
}

} // namespace

std::vector<Array> run_region(const Node& n, const std::vector<Array>& in,
                              const std::vector<bool>& wanted, const BodyRunner& run_body) {
    const Region& r = *n.attr<RegionAttrs>().region;
    std::vector<TensorType> types;
    types.reserve(in.size());
    for (const auto& a : in)
        types.push_back({a.dtype(), a.shape()});
    types = detail::region_result_types(r, types, true);
    switch (r.kind) {
    case RegionKind::Scan:
        return run_scan(r, in, types, wanted, run_body);
    case RegionKind::While:
        return run_while(r, in, types, wanted, run_body);
    case RegionKind::Cond:
        return run_cond(r, in, run_body);
    }
    return {};
}

std::vector<Array> eval_body(const Node& n, int which, const std::vector<Array>& args,
                             uint64_t counter) {
    const Region& r = *n.attr<RegionAttrs>().region;
    const detail::Body& b = which == 0 ? r.body : r.body2;
    std::unordered_map<const Node*, Array> env;
    for (size_t i = 0; i < b.params.size(); ++i)
        env[b.params[i].get()] = args[i];
    std::vector<const Node*> roots;
    for (const auto& x : b.results)
        roots.push_back(x.get());
    std::vector<Array> ins;
    for (const Node* x : topo_order(roots)) {
        if (env.count(x))
            continue;
        if (x->is(Op::Constant)) {
            env[x] = x->attr<ConstantAttrs>().value;
            continue;
        }
        SJ_ASSERT(x->num_inputs() > 0)
            << r.name << ": the body reads " << x->describe() << ", not captured";
        ins.clear();
        for (const auto& i : x->inputs())
            ins.push_back(env.at(i.get()));
        env[x] = eval_node(*x, ins, counter);
    }
    std::vector<Array> out;
    for (const auto& x : b.results)
        out.push_back(env.at(x.get()));
    return out;
}

void register_control_flow_kernels(Kernel* t) {
    for (Op op : {Op::Scan, Op::WhileLoop, Op::Cond})
        t[int(op)] = region_kernel;
}

} // namespace sj::ref
