// Reverse-mode gradients on the graph; jvp, jacobian and Hessian-vector products built on them.
#include "../ops/OpDef.h"

#include <symjax/Autodiff.h>
#include <symjax/Graph.h>
#include <symjax/Ops.h>
#include <symjax/Variable.h>
#include <symjax/ir/ControlFlow.h>
#include <symjax/ir/Node.h>

#include <map>

#include <unordered_map>
#include <unordered_set>

namespace sj {

std::vector<Tensor> vjp(const std::vector<Tensor>& outputs, const std::vector<Tensor>& cotangents,
                        const std::vector<Tensor>& wrt) {
    SJ_CHECK(outputs.size() == cotangents.size(), Error)
        << "vjp: " << outputs.size() << " outputs but " << cotangents.size() << " cotangents";
    std::vector<const Node*> roots;
    for (const auto& o : outputs) roots.push_back(o.node().get());
    std::vector<const Node*> order = topo_order(roots);

    // Only nodes that depend on some wrt need a gradient.
    std::unordered_set<const Node*> targets, relevant;
    for (const auto& w : wrt) {
        SJ_CHECK(w.defined(), Error) << "gradients: undefined tensor in wrt";
        SJ_CHECK(is_float(w.dtype()), TypeError)
            << "gradients: cannot differentiate with respect to " << w.name() << " "
            << w.type_str() << " (not a float tensor)";
        targets.insert(w.node().get());
    }
    for (const Node* n : order) {
        bool r = targets.count(n) > 0;
        for (size_t i = 0; !r && i < n->num_inputs(); ++i) r = relevant.count(n->input(i).get()) > 0;
        if (r && is_float(n->dtype())) relevant.insert(n);
    }

    // A region's results are sibling nodes (Note [Structured ops]): their cotangents are gathered
    // and the region differentiated once, at its first node in topological order, which every
    // consumer of every sibling follows.
    std::map<detail::RegionKey, std::vector<const Node*>> siblings;
    for (const Node* n : order)
        if (has_trait(n->op(), kRegion))
            siblings[detail::region_key(*n)].push_back(n);

    std::unordered_map<const Node*, Tensor> grads;
    for (size_t k = 0; k < outputs.size(); ++k) {
        const Tensor& c = cotangents[k];
        SJ_CHECK(c.dtype() == outputs[k].dtype(), TypeError)
            << "vjp: cotangent " << c.type_str() << " for output " << outputs[k].name() << " "
            << outputs[k].type_str();
        detail::accumulate(grads[outputs[k].node().get()], c);
    }
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
        const Node* n = *it;
        std::vector<Tensor> din;
        if (has_trait(n->op(), kRegion)) {
            const auto& sib = siblings.at(detail::region_key(*n));
            if (sib.front() != n) continue;
            std::vector<Tensor> cot(size_t(n->attr<RegionAttrs>().region->num_results()));
            bool any = false;
            for (const Node* s : sib) {
                auto gi = grads.find(s);
                if (gi == grads.end() || !gi->second.defined() || !relevant.count(s)) continue;
                cot[size_t(s->attr<RegionAttrs>().output)] = gi->second;
                any = true;
            }
            if (!any) continue;
            din = detail::region_vjp(*n, cot);
            for (const Node* s : sib)
                if (!targets.count(s)) grads.erase(s);
        } else {
            if (!relevant.count(n) || n->num_inputs() == 0) continue;
            auto gi = grads.find(n);
            if (gi == grads.end() || !gi->second.defined()) continue;
            const detail::OpDef& def = detail::op_def(n->op());
            if (!def.grad) continue;
            din.resize(n->num_inputs());
            def.grad(*n, gi->second, din);
        }
        for (size_t i = 0; i < din.size(); ++i) {
            const Node* x = n->input(i).get();
            if (!din[i].defined() || !relevant.count(x)) continue;
            Tensor d = din[i].dtype() == x->dtype() ? din[i] : cast(din[i], x->dtype());
            SJ_ASSERT(d.rank() == x->rank())
                << "gradient of " << op_name(n->op()) << " for input " << i << " has shape "
                << d.type_str() << ", input is " << type_str(x->type());
            detail::accumulate(grads[x], d);
        }
        // free memory held by gradients no longer needed
        if (!targets.count(n)) grads.erase(n);
    }
    std::vector<Tensor> out;
    for (const auto& w : wrt) {
        auto gi = grads.find(w.node().get());
        out.push_back(gi != grads.end() && gi->second.defined() ? gi->second : zeros_like(w));
    }
    return out;
}

std::vector<Tensor> gradients(const Tensor& cost, const std::vector<Tensor>& wrt) {
    SJ_CHECK(cost.defined(), Error) << "gradients: undefined cost";
    SJ_CHECK(cost.rank() == 0, ShapeError)
        << "gradients: the cost " << cost.name() << " must be a scalar (0-d) tensor, got "
        << cost.type_str() << "; reduce it first (e.g. sum or mean), or use vjp";
    SJ_CHECK(is_float(cost.dtype()), TypeError)
        << "gradients: the cost " << cost.name() << " must be a float tensor, got "
        << cost.type_str();
    return vjp({cost}, {scalar(1.0, cost.dtype())}, wrt);
}


Tensor jvp(const Tensor& output, const std::vector<Tensor>& wrt, const std::vector<Tensor>& tangents) {
    SJ_CHECK(wrt.size() == tangents.size(), Error)
        << "jvp: " << wrt.size() << " wrt tensors but " << tangents.size() << " tangents";
    SJ_CHECK(is_float(output.dtype()), TypeError) << "jvp: output " << output.name() << " is "
                                                 << output.type_str() << ", not float";
    // vjp is linear in its cotangent u, so d/du <vjp(u), t> = J t.
    Placeholder u(output.shape(), output.dtype(), "jvp_cotangent");
    std::vector<Tensor> r = vjp({output}, {u}, wrt);
    Tensor s;
    for (size_t i = 0; i < wrt.size(); ++i) {
        Tensor term = sum(r[i] * cast(tangents[i], r[i].dtype()));
        s = s.defined() ? s + term : term;
    }
    Tensor j = vjp({s}, {scalar(1.0, s.dtype())}, {u})[0];
    // The result does not depend on u's value; bind it to zeros in case a rule kept it in the graph.
    return clone(j, {{u, zeros_like(output)}});
}

Tensor jacobian(const Tensor& output, const Tensor& wrt) {
    int64_t m = numel(output.shape());
    SJ_CHECK(m >= 0, ShapeError) << "jacobian: output " << output.name() << " " << output.type_str()
                                 << " must have a size known at build time";
    std::vector<Tensor> rows;
    for (int64_t i = 0; i < m; ++i) {
        Array e(output.dtype(), output.shape());
        dispatch(e.dtype(), [&](auto tag) {
            static_cast<typename decltype(tag)::type*>(e.raw())[i] = 1;
        });
        rows.push_back(vjp({output}, {constant(e)}, {wrt})[0]);
    }
    Shape out = output.shape();
    out.insert(out.end(), wrt.shape().begin(), wrt.shape().end());
    if (m == 0) return zeros(out, wrt.dtype());
    return reshape(stack(rows, 0), out);
}

Tensor hessian_vector_product(const Tensor& cost, const Tensor& wrt, const Tensor& v) {
    Tensor g = gradients(cost, wrt);
    return gradients(sum(g * cast(v, g.dtype())), wrt);
}

} // namespace sj
