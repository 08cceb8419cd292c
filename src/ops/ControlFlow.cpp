// Structured control flow: the type rule of scan, while_loop and cond, and the typing of their
// bodies. The tracing API and the gradients are in src/api/ControlFlow.cpp; the execution is
// src/backend/reference/ControlFlowKernels.cpp, which every backend drives.
#include "OpDef.h"

#include <symjax/Graph.h>
#include <symjax/ir/ControlFlow.h>
#include <symjax/ir/Node.h>

#include <map>
#include <unordered_map>

namespace sj::detail {

// Note [Structured ops]
// A loop (scan, while_loop) or a conditional (cond) is one Region: its traced bodies, how many
// carries, sequences and captured tensors it has, and its options. The IR has one result per
// node, so a region with k results is k nodes: the same op, the same inputs and the same Region,
// each naming its result in RegionAttrs::output. They are siblings: interning keeps them apart
// (the output index is an attribute), clone and the rewrites rebuild each with the same new
// inputs (so they stay siblings), and the passes see ordinary nodes with one value each.
// A backend runs the region once per call for all of the siblings its program holds (the
// RegionKey groups them), computing only the results some sibling asks for: the carry history,
// which only gradients read, costs nothing when no gradient is taken. Autodiff handles the
// siblings together too (vjp in src/autodiff/Autodiff.cpp): it gathers the cotangents of every
// result and emits one backward loop.
//
// A body reads only its parameters and constants. Whatever else the user's function used (a
// variable, a placeholder, an intermediate computed outside, a carry of an enclosing loop) was
// captured when it was traced: it became an input of the loop's nodes and a parameter of the
// body. So gradients flow to captured tensors as to any input, clone and givens replace them,
// function() finds the variables and placeholders a loop reads by walking inputs, and a body
// can be compiled on its own as a program whose inputs are its parameters.

int Region::num_results() const {
    switch (kind) {
    case RegionKind::Scan:
        return 2 * carries + outputs;
    case RegionKind::While:
        return carries + 1 + (max_iterations >= 0 ? carries : 0);
    case RegionKind::Cond:
        return outputs;
    }
    return 0;
}

int Region::captured_begin() const {
    switch (kind) {
    case RegionKind::Scan:
        return carries + sequences;
    case RegionKind::While:
        return carries;
    case RegionKind::Cond:
        return 1 + carries;
    }
    return 0;
}

std::string Region::result_str(int k) const {
    auto n = [](const char* what, int i) { return std::string(what) + " " + std::to_string(i); };
    switch (kind) {
    case RegionKind::Scan:
        if (k < carries)
            return n("final carry", k);
        if (k < carries + outputs)
            return n("stacked output", k - carries);
        return n("carry history", k - carries - outputs);
    case RegionKind::While:
        if (k < carries)
            return n("final carry", k);
        if (k == carries)
            return "trip count";
        return n("carry history", k - carries - 1);
    case RegionKind::Cond:
        return n("result", k);
    }
    return "?";
}

RegionKey region_key(const Node& n) {
    RegionKey k{n.attr<RegionAttrs>().region.get(), {}};
    for (const auto& i : n.inputs())
        k.inputs.push_back(i.get());
    return k;
}

std::vector<NodePtr> merge_loop_copies(const std::vector<NodePtr>& roots, int64_t* merged) {
    if (merged)
        *merged = 0;
    std::vector<const Node*> rs;
    for (const auto& r : roots)
        rs.push_back(r.get());
    const std::vector<const Node*> order = topo_order(rs);
    // the copies present, by the region they extend and their inputs (the first one wins)
    std::map<RegionKey, std::shared_ptr<const Region>> copies;
    for (const Node* n : order) {
        if (!n->is(Op::Scan))
            continue;
        const auto& region = n->attr<RegionAttrs>().region;
        if (!region->base)
            continue;
        RegionKey key = region_key(*n);
        key.region = region->base.get();
        copies.emplace(std::move(key), region);
    }
    if (copies.empty())
        return roots;
    Givens givens;
    for (const Node* n : order) {
        if (!n->is(Op::Scan))
            continue;
        auto it = copies.find(region_key(*n));
        if (it == copies.end())
            continue;
        const Region &base = *n->attr<RegionAttrs>().region, &copy = *it->second;
        // the copy's extra step outputs come after the base's: the carry history moves along
        int64_t k = n->attr<RegionAttrs>().output;
        if (k >= base.carries + base.outputs)
            k += copy.outputs - base.outputs;
        NodePtr m = Node::make(Op::Scan, RegionAttrs{it->second, k}, n->inputs());
        givens.emplace_back(Tensor(n->shared_from_this()), Tensor(m));
    }
    if (merged)
        *merged = int64_t(givens.size());
    if (givens.empty())
        return roots;
    std::vector<Tensor> ts(roots.begin(), roots.end());
    std::vector<NodePtr> out;
    for (const Tensor& t : clone(ts, givens))
        out.push_back(t.node());
    return out;
}

namespace {

/// ShapeError/TypeError while building the graph; InputError at run time (the call's values).
template <class E> [[noreturn]] void fail(bool at_runtime, const std::string& msg) {
    if (at_runtime)
        throw InputError(msg);
    throw E(msg);
}

bool types_agree(const TensorType& a, const TensorType& b, bool exact) {
    if (a.dtype != b.dtype || a.shape.size() != b.shape.size())
        return false;
    for (size_t i = 0; i < a.shape.size(); ++i)
        if (exact ? a.shape[i] != b.shape[i] : !dims_agree(a.shape[i], b.shape[i]))
            return false;
    return true;
}

/// The more specific of two agreeing types (known dims win over -1).
TensorType meet(TensorType a, const TensorType& b) {
    for (size_t i = 0; i < a.shape.size(); ++i)
        if (a.shape[i] == -1)
            a.shape[i] = b.shape[i];
    return a;
}

/// The types of a body's results when its parameters have `params`.
std::vector<TensorType> body_types(const Region& r, const Body& b,
                                   const std::vector<TensorType>& params, bool at_runtime,
                                   const char* which) {
    bool as_traced = true;
    for (size_t i = 0; i < params.size(); ++i) {
        const TensorType& t = b.params[i]->type();
        if (!types_agree(params[i], t, false))
            fail<ShapeError>(at_runtime, r.name + ": " + which + " parameter " + std::to_string(i) +
                                             " ('" + b.params[i]->name() + "') gets " +
                                             type_str(params[i]) + ", the body was traced with " +
                                             type_str(t));
        as_traced = as_traced && params[i] == t;
    }
    std::vector<TensorType> out;
    if (as_traced) {
        for (const auto& n : b.results)
            out.push_back(n->type());
        return out;
    }
    std::unordered_map<const Node*, TensorType> ty;
    for (size_t i = 0; i < params.size(); ++i)
        ty[b.params[i].get()] = params[i];
    std::vector<const Node*> roots;
    for (const auto& n : b.results)
        roots.push_back(n.get());
    std::vector<TensorType> in;
    for (const Node* n : topo_order(roots)) {
        if (ty.count(n))
            continue;
        if (n->num_inputs() == 0) {
            ty[n] = n->type();
            continue;
        }
        in.clear();
        for (const auto& i : n->inputs())
            in.push_back(ty.at(i.get()));
        InferCtx c{n->op(), n->attrs(), in, &n->inputs(), at_runtime};
        ty[n] = op_def(n->op()).infer(c);
    }
    for (const auto& n : b.results)
        out.push_back(ty.at(n.get()));
    return out;
}

std::vector<TensorType> slice_types(const std::vector<TensorType>& in, int begin, int count) {
    return {in.begin() + begin, in.begin() + begin + count};
}

TensorType stacked(int64_t length, TensorType t) {
    t.shape.insert(t.shape.begin(), length);
    return t;
}

/// A carry's type after a step must be the type it entered with.
void check_carries(const Region& r, const std::vector<TensorType>& init,
                   const std::vector<TensorType>& after, bool at_runtime) {
    for (int i = 0; i < r.carries; ++i)
        if (!types_agree(init[size_t(i)], after[size_t(i)], at_runtime))
            fail<TypeError>(at_runtime,
                            r.name + ": the body returns " + type_str(after[size_t(i)]) +
                                " for carry " + std::to_string(i) + ", which entered as " +
                                type_str(init[size_t(i)]) +
                                "; a carry keeps its dtype and shape from step to step");
}

} // namespace

std::vector<TensorType> region_result_types(const Region& r, const std::vector<TensorType>& in,
                                            bool at_runtime) {
    const size_t expected =
        size_t(r.captured2_begin() + (r.kind == RegionKind::Scan ? 0 : r.captured2));
    SJ_ASSERT(in.size() == expected)
        << r.name << ": " << in.size() << " inputs, the region takes " << expected;
    std::vector<TensorType> init = slice_types(in, r.kind == RegionKind::Cond ? 1 : 0, r.carries);
    std::vector<TensorType> res;
    switch (r.kind) {
    case RegionKind::Scan: {
        int64_t length = r.length;
        std::vector<TensorType> params = init;
        for (int s = 0; s < r.sequences; ++s) {
            const TensorType& t = in[size_t(r.carries + s)];
            if (t.shape.empty())
                fail<ShapeError>(at_runtime, r.name + ": sequence " + std::to_string(s) +
                                                 " is a 0-d " + type_str(t) +
                                                 "; a sequence is scanned along its first dim");
            if (!dims_agree(length, t.shape[0]))
                fail<ShapeError>(
                    at_runtime, r.name + ": sequence " + std::to_string(s) + " " + type_str(t) +
                                    " has " + std::to_string(t.shape[0]) +
                                    " steps, the others (or the length) " + std::to_string(length));
            if (length == -1)
                length = t.shape[0];
            params.push_back({t.dtype, Shape(t.shape.begin() + 1, t.shape.end())});
        }
        auto cap = slice_types(in, r.captured_begin(), r.captured);
        params.insert(params.end(), cap.begin(), cap.end());
        std::vector<TensorType> out = body_types(r, r.body, params, at_runtime, "body");
        check_carries(r, init, out, at_runtime);
        for (int i = 0; i < r.carries; ++i)
            res.push_back(meet(init[size_t(i)], out[size_t(i)]));
        for (int i = 0; i < r.outputs; ++i)
            res.push_back(stacked(length, out[size_t(r.carries + i)]));
        for (int i = 0; i < r.carries; ++i)
            res.push_back(stacked(length, res[size_t(i)]));
        return res;
    }
    case RegionKind::While: {
        std::vector<TensorType> params = init, cparams = init;
        auto cap = slice_types(in, r.captured_begin(), r.captured);
        auto cap2 = slice_types(in, r.captured2_begin(), r.captured2);
        params.insert(params.end(), cap.begin(), cap.end());
        cparams.insert(cparams.end(), cap2.begin(), cap2.end());
        std::vector<TensorType> go = body_types(r, r.body2, cparams, at_runtime, "condition");
        if (go[0].dtype != DType::Bool || !go[0].shape.empty())
            fail<TypeError>(at_runtime, r.name + ": the condition must return a bool scalar, got " +
                                            type_str(go[0]));
        std::vector<TensorType> out = body_types(r, r.body, params, at_runtime, "body");
        check_carries(r, init, out, at_runtime);
        for (int i = 0; i < r.carries; ++i)
            res.push_back(meet(init[size_t(i)], out[size_t(i)]));
        res.push_back({DType::I64, {}});
        if (r.max_iterations >= 0)
            for (int i = 0; i < r.carries; ++i)
                res.push_back(stacked(r.max_iterations, res[size_t(i)]));
        return res;
    }
    case RegionKind::Cond: {
        if (in[0].dtype != DType::Bool || !in[0].shape.empty())
            fail<TypeError>(at_runtime, r.name + ": the predicate must be a bool scalar, got " +
                                            type_str(in[0]) +
                                            "; compare or reduce it first (e.g. x > 0, any(x))");
        std::vector<TensorType> p1 = init, p2 = init;
        auto cap = slice_types(in, r.captured_begin(), r.captured);
        auto cap2 = slice_types(in, r.captured2_begin(), r.captured2);
        p1.insert(p1.end(), cap.begin(), cap.end());
        p2.insert(p2.end(), cap2.begin(), cap2.end());
        std::vector<TensorType> a = body_types(r, r.body, p1, at_runtime, "true branch");
        std::vector<TensorType> b = body_types(r, r.body2, p2, at_runtime, "false branch");
        for (int i = 0; i < r.outputs; ++i) {
            if (!types_agree(a[size_t(i)], b[size_t(i)], at_runtime))
                fail<TypeError>(
                    at_runtime,
                    r.name + ": result " + std::to_string(i) + " is " + type_str(a[size_t(i)]) +
                        " in the true branch and " + type_str(b[size_t(i)]) +
                        " in the false branch; both branches must return the same types");
            res.push_back(meet(a[size_t(i)], b[size_t(i)]));
        }
        return res;
    }
    }
    return res;
}

namespace {
TensorType infer_region(const InferCtx& c) {
    const auto& a = c.attr<RegionAttrs>();
    SJ_ASSERT(a.region) << op_name(c.op) << " without a region";
    SJ_ASSERT(a.output >= 0 && a.output < a.region->num_results())
        << a.region->name << ": result " << a.output << " of " << a.region->num_results();
    return region_result_types(*a.region, c.in, c.at_runtime)[size_t(a.output)];
}
} // namespace

void register_control_flow_ops(OpDef* t) {
    // Their gradients are not per-node rules: vjp gathers a region's siblings and builds one
    // backward region (region_vjp in src/api/ControlFlow.cpp).
    for (Op op : {Op::Scan, Op::WhileLoop, Op::Cond})
        t[int(op)].infer = infer_region;
}

} // namespace sj::detail
