// vmap: tracing a per-example function and rewriting it into a batched graph, op by op, with the
// batching rules of the op table (Note [Batching rules]).
#include "../ops/OpDef.h"

#include <symjax/ControlFlow.h>
#include <symjax/Ops.h>
#include <symjax/Variable.h>
#include <symjax/Vmap.h>
#include <symjax/ir/ControlFlow.h>
#include <symjax/ir/Node.h>

#include <map>
#include <unordered_map>
#include <utility>

namespace sj {

// Note [Batching rules]
// ~~~~~~~~~~~~~~~~~~~~~
// vmap traces `fn` once on placeholders of one example's type (the per-example graph), then walks
// that graph from the placeholders to the results. A node none of whose inputs depends on a
// mapped argument is kept as it is (it is the same for every example: weights, constants, a
// gradient's parts that only read weights). A node that does depends gets a batched value: one
// tensor holding the node's value for every example, the batch along dim 0. The op's batching
// rule (OpDef::batch, next to its type and gradient rules) builds it from the batched inputs:
// elementwise ops give the batched inputs size-1 dims after the batch so broadcasting lines them
// up with the unbatched ones; reductions, permutes, slices, pads, flips, concats and cumsums shift
// their axes by one; broadcast and reshape prepend the batch; dot_general makes the batch one of
// its batch dims (both sides batched) or a free dim (one side), then moves it to the front; conv
// and pool fold the batch into their own minibatch. A random draw traced inside fn is batched even
// though it reads no argument: the draw gets the batch as its first dim, so each example draws its
// own numbers (JAX's vmap of a random op repeats one draw unless keys are split by hand).
//
// The batch is always dim 0 inside the rewrite; in_axes and out_axes only move it at the ends.
// A rule may decline a case (an undefined result): conv with a batched filter, gather with both
// operands batched, reshape to a shape with two unknown dims. The node then runs once per example
// in a `map` loop over the batch (a scan whose body is the node on one slice), which is always
// right; docs/vmap.md lists which cases loop. Control-flow regions are batched as a whole (all
// the sibling nodes of one region at once): a scan, while_loop or cond is rebuilt with the public
// API around vmapped copies of its bodies (batched_scan, batched_while, batched_cond), so its
// gradients come from the usual region rules.
//
// Only the batched part is new graph: vmap of a function that calls gradients() rewrites the
// backward graph too, which is how per-example gradients come out (the weight gradient's
// dot_general becomes a batched outer product).

namespace detail {

namespace {
/// The B-vector [B] of bools (all true) taken from the batch reference's dim 0.
Tensor batch_mask(const BatchArgs& b, int64_t rank) {
    const Tensor& ref = b.ref;
    std::vector<int64_t> start(ref.rank(), 0), stop(ref.rank(), 1), step(ref.rank(), 1);
    stop[0] = Index::kEnd;
    Tensor v = ref.rank() == 1 ? ref : reshape(index_slice(ref, start, stop, step, 0), {-1});
    Tensor t = make(Op::Broadcast, {constant(Array::scalar(true)), v},
                    BroadcastAttrs{Shape{-1}, std::vector<int64_t>{}});
    Shape s(size_t(rank), 1);
    s[0] = -1;
    return rank == 1 ? t : reshape(t, s);
}
} // namespace

Tensor move_batch_axis(const Tensor& x, int64_t axis) {
    if (axis == 0)
        return x;
    Axes perm;
    for (int64_t i = 1; i <= axis; ++i)
        perm.push_back(i);
    perm.push_back(0);
    for (int64_t i = axis + 1; i < x.rank(); ++i)
        perm.push_back(i);
    return transpose(x, perm);
}

Tensor move_batch_axis_to_front(const Tensor& x, int64_t axis) {
    if (axis == 0)
        return x;
    Axes perm{axis};
    for (int64_t d = 0; d < x.rank(); ++d)
        if (d != axis)
            perm.push_back(d);
    return transpose(x, perm);
}

Tensor broadcast_batch(const BatchArgs& b, const Tensor& x) {
    Shape s{b.size};
    s.insert(s.end(), x.shape().begin(), x.shape().end());
    if (b.size >= 0)
        return broadcast_to(x, s);
    Tensor mask = batch_mask(b, x.rank() + 1);
    if (is_static(x.shape())) {
        std::vector<int64_t> dims;
        for (int64_t i = 1; i <= x.rank(); ++i)
            dims.push_back(i);
        return make(Op::Broadcast, {x, mask}, BroadcastAttrs{s, dims});
    }
    return where(mask, x, x);
}

Tensor batched_input(const BatchArgs& b, size_t i) {
    return b.batched[i] ? b.in[i] : broadcast_batch(b, b.in[i]);
}

Tensor fold_batch(const Tensor& x) {
    const Shape& s = x.shape();
    if (s.size() < 2)
        return Tensor();
    int unknown = (s[0] < 0) + (s[1] < 0);
    for (size_t i = 2; i < s.size(); ++i)
        unknown += s[i] < 0 ? 2 : 0; // must be known
    if (unknown > 1)
        return Tensor();
    Shape f{s[0] < 0 || s[1] < 0 ? -1 : s[0] * s[1]};
    f.insert(f.end(), s.begin() + 2, s.end());
    return reshape(x, f);
}

Tensor unfold_batch(const BatchArgs& b, const Tensor& y) {
    Shape s{b.size};
    s.insert(s.end(), b.n.shape().begin(), b.n.shape().end());
    int unknown = 0;
    for (int64_t d : s)
        unknown += d < 0;
    if (unknown > 1)
        return Tensor();
    return reshape(y, s);
}

Tensor batch_as_is(const BatchArgs& b) {
    return make(b.n.op(), {b.in[0]}, b.n.attrs());
}

Tensor batch_elementwise(const BatchArgs& b) {
    const int64_t rank = b.n.shape().size();
    std::vector<Tensor> in = b.in;
    for (size_t i = 0; i < in.size(); ++i) {
        if (!b.batched[i])
            continue;
        // [B, s...] -> [B, 1..., s...] with the result's per-example rank
        for (int64_t r = b.n.input(i)->shape().size(); r < rank; ++r)
            in[i] = expand_dims(in[i], 1);
    }
    return make(b.n.op(), in, b.n.attrs());
}

} // namespace detail

namespace {

using detail::BatchArgs;

int64_t normalize_batch_axis(int64_t axis, int64_t rank, const std::string& what) {
    SJ_CHECK(axis >= -rank && axis < rank, ShapeError)
        << what << ": batch axis " << axis << " is out of range for rank " << rank;
    return axis < 0 ? axis + rank : axis;
}

/// Every result of the loop `any` is one of (its sibling nodes, in result order), including
/// those the public API does not return (trip count, carry history).
Tensors region_results(const Tensor& any) {
    const Node& n = *any.node();
    const auto& r = n.attr<RegionAttrs>().region;
    Tensors out;
    for (int k = 0; k < r->num_results(); ++k)
        out.emplace_back(Node::make(n.op(), RegionAttrs{r, k}, n.inputs()));
    return out;
}

/// The rewrite of one traced function (Note [Batching rules]).
class Vmapper {
public:
    Vmapper(std::string name, int64_t size, Tensor ref, uint64_t mark)
        : name_(std::move(name)), size_(size), ref_(std::move(ref)), mark_(mark) {}

    void bind(const Node* placeholder, const Tensor& batched) {
        values_[placeholder] = {batched, true};
    }

    /// The node's value in the batched program, and whether it carries the batch.
    std::pair<Tensor, bool> get(const Node* n) const {
        auto it = values_.find(n);
        if (it == values_.end())
            return {Tensor(n->shared_from_this()), false};
        return it->second;
    }

    void run(const std::vector<const Node*>& order) {
        for (const Node* n : order) {
            if (values_.count(n) || n->num_inputs() == 0)
                continue;
            visit(*n);
        }
    }

private:
    void visit(const Node& n) {
        const size_t k = n.num_inputs();
        BatchArgs b{n, {}, {}, size_, ref_};
        bool any = false, changed = false, only_shapes = true;
        for (size_t i = 0; i < k; ++i) {
            auto [v, batched] = get(n.input(i).get());
            changed |= v.node() != n.input(i);
            any |= batched;
            if (batched && !detail::shape_only_input(n, i))
                only_shapes = false;
            b.in.push_back(v);
            b.batched.push_back(batched);
        }
        const bool draw = has_trait(n.op(), kRandom) && n.id() >= mark_;
        if (!any && !draw) {
            if (changed)
                values_[&n] = {detail::make(n.op(), b.in, n.attrs()), false};
            return;
        }
        if (any && only_shapes && !draw) {
            // only a shape comes from the batch: every example's value is the same; one
            // example's slice gives the shape
            for (size_t i = 0; i < k; ++i)
                if (b.batched[i])
                    b.in[i] = b.in[i][0];
            values_[&n] = {detail::make(n.op(), b.in, n.attrs()), false};
            return;
        }
        if (has_trait(n.op(), kRegion)) {
            values_[&n] = {region(n, b), true};
            return;
        }
        Tensor r;
        if (auto rule = detail::op_def(n.op()).batch)
            r = rule(b);
        if (!r.defined())
            r = loop(n, b, {n.attrs()})[0];
        values_[&n] = {r, true};
    }

    /// Every result of n's region (its sibling nodes) for the batch, by one loop.
    Tensor region(const Node& n, const BatchArgs& b) {
        const auto& ra = n.attr<RegionAttrs>();
        detail::RegionKey key{ra.region.get(), {}};
        for (const auto& i : n.inputs())
            key.inputs.push_back(i.get());
        auto it = regions_.find(key);
        if (it == regions_.end()) {
            Tensors batched;
            if (ra.region->kind == detail::RegionKind::Scan)
                batched = batched_scan(*ra.region, b);
            if (ra.region->kind == detail::RegionKind::Cond)
                batched = batched_cond(*ra.region, b);
            if (ra.region->kind == detail::RegionKind::While)
                batched = batched_while(*ra.region, b);
            if (batched.empty()) {
                std::vector<Attrs> results;
                for (int r = 0; r < ra.region->num_results(); ++r)
                    results.emplace_back(RegionAttrs{ra.region, r});
                batched = loop(n, b, results);
            }
            it = regions_.emplace(std::move(key), std::move(batched)).first;
        }
        return it->second[size_t(ra.output)];
    }

    /// A cond over the batch. A shared predicate: the same cond, its branches vmapped. A
    /// predicate per example: both branches run on the whole batch and `where` picks each
    /// example's results (JAX's rule; a branch must then be safe to run on every example).
    Tensors batched_cond(const detail::Region& r, const BatchArgs& b) {
        const size_t nc = size_t(r.carries);
        // branch k's parameters are the operands and its own captured tensors (indices into
        // the inputs after the predicate)
        std::vector<size_t> first, second;
        for (size_t i = 0; i < nc; ++i)
            first.push_back(i), second.push_back(i);
        for (int i = 0; i < r.captured; ++i)
            first.push_back(nc + size_t(i));
        for (int i = 0; i < r.captured2; ++i)
            second.push_back(nc + size_t(r.captured + i));
        auto region = b.n.attr<RegionAttrs>().region;
        auto branch = [this, &b](const detail::Body& body, const std::vector<size_t>& idx,
                                 const Tensors& values) {
            Tensors args;
            std::vector<BatchAxis> axes;
            bool any = false;
            for (size_t i : idx) {
                args.push_back(values[i]);
                axes.push_back(b.batched[i + 1] ? BatchAxis(0) : not_mapped);
                any |= b.batched[i + 1];
            }
            auto f = [&](const Tensors& a) { return detail::instantiate_body(body, a); };
            if (any)
                return vmap(f, {axes, {}, name_})(args);
            Tensors out = f(args); // this branch reads nothing batched: the same for every example
            for (auto& t : out)
                t = detail::broadcast_batch(b, t);
            return out;
        };
        const Tensors rest(b.in.begin() + 1, b.in.end());
        if (!b.batched[0])
            return cond(
                b.in[0], [&](const Tensors& ops) { return branch(region->body, first, ops); },
                [&](const Tensors& ops) { return branch(region->body2, second, ops); }, rest);
        Tensors t = branch(region->body, first, rest), f = branch(region->body2, second, rest);
        Tensors out;
        for (size_t k = 0; k < t.size(); ++k) {
            Shape s(size_t(t[k].rank()), 1);
            s[0] = -1;
            out.push_back(where(reshape(b.in[0], s), t[k], f[k]));
        }
        return out;
    }

    /// A while_loop over the batch: it runs while some example's condition holds, and an
    /// example whose condition fails keeps its carries (`where`); a per-example counter is the
    /// trip count. Each example so takes the steps it would take alone (JAX's rule).
    Tensors batched_while(const detail::Region& r, const BatchArgs& b) {
        const size_t nc = size_t(r.carries), n1 = size_t(r.captured), n2 = size_t(r.captured2);
        Tensors init;
        for (size_t i = 0; i < nc; ++i)
            init.push_back(detail::batched_input(b, i));
        init.push_back(detail::broadcast_batch(b, constant(Array::scalar<int64_t>(0))));
        const Tensors shared(b.in.begin() + std::ptrdiff_t(nc), b.in.end());
        std::vector<BatchAxis> body_axes(nc, BatchAxis(0)), cond_axes(nc, BatchAxis(0));
        for (size_t i = 0; i < n1; ++i)
            body_axes.push_back(b.batched[nc + i] ? BatchAxis(0) : not_mapped);
        for (size_t i = 0; i < n2; ++i)
            cond_axes.push_back(b.batched[nc + n1 + i] ? BatchAxis(0) : not_mapped);
        auto region = b.n.attr<RegionAttrs>().region;
        const std::string name = name_;
        // each example's condition, [B] bool
        auto going = [=](const Tensors& vars, const Tensors& ns) {
            Tensors args(vars.begin(), vars.begin() + std::ptrdiff_t(nc));
            args.insert(args.end(), ns.begin() + std::ptrdiff_t(n1), ns.end());
            auto f = [&](const Tensors& a) { return detail::instantiate_body(region->body2, a); };
            return vmap(f, {cond_axes, {}, name})(args)[0];
        };
        CondFn c = [=](const Tensors& vars, const Tensors& ns) { return any(going(vars, ns)); };
        BodyFn body = [=](const Tensors& vars, const Tensors& ns) {
            Tensor p = going(vars, ns);
            Tensors args(vars.begin(), vars.begin() + std::ptrdiff_t(nc));
            args.insert(args.end(), ns.begin(), ns.begin() + std::ptrdiff_t(n1));
            auto f = [&](const Tensors& a) { return detail::instantiate_body(region->body, a); };
            Tensors next = vmap(f, {body_axes, {}, name})(args);
            Tensors out;
            for (size_t k = 0; k < nc; ++k) {
                Shape s(size_t(next[k].rank()), 1);
                s[0] = -1;
                out.push_back(where(reshape(p, s), next[k], vars[k]));
            }
            out.push_back(vars[nc] + cast(p, DType::I64));
            return out;
        };
        WhileOptions wo;
        wo.name = r.name;
        if (r.max_iterations >= 0)
            wo.max_iterations = r.max_iterations;
        Tensors fin = while_loop(c, body, init, shared, wo);
        // the final carries, the trip count of each example (our counter, the last carry), then
        // the new loop's own trip count and the carry history [max_iterations, B, ...]
        const Tensors all = region_results(fin[0]);
        Tensors results(all.begin(), all.begin() + std::ptrdiff_t(nc + 1));
        if (r.max_iterations >= 0)
            for (size_t k = 0; k < nc; ++k)
                results.push_back(detail::move_batch_axis_to_front(all[nc + 2 + k], 1));
        return results;
    }

    /// A scan over the batch: the same scan, its body vmapped. Every carry is batched (an
    /// unbatched one is repeated: the body may make it depend on the batch); a batched sequence
    /// is scanned along its dim 1; the stacked results come back with the batch first. Empty when
    /// the scan has no carry and no step output to hang its results on.
    Tensors batched_scan(const detail::Region& r, const BatchArgs& b) {
        const size_t nc = size_t(r.carries), ns = size_t(r.sequences);
        if (nc == 0 && r.outputs == 0)
            return {};
        Tensors init, seqs, shared;
        std::vector<BatchAxis> axes(nc, BatchAxis(0));
        for (size_t i = 0; i < nc; ++i)
            init.push_back(detail::batched_input(b, i));
        for (size_t i = nc; i < b.in.size(); ++i) {
            const bool seq = i < nc + ns;
            Tensor v = b.in[i];
            if (seq && b.batched[i])
                v = detail::move_batch_axis(v, 1);
            (seq ? seqs : shared).push_back(v);
            axes.push_back(b.batched[i] ? BatchAxis(0) : not_mapped);
        }
        // the body is kept alive by the region this lambda's scan builds
        auto region = b.n.attr<RegionAttrs>().region;
        const std::string name = name_;
        ScanFn step = [region, axes, nc, name](const Tensors& carry, const Tensors& args) {
            Tensors all = carry;
            all.insert(all.end(), args.begin(), args.end());
            VmapOptions o{axes, {}, name};
            Tensors out =
                vmap([&](const Tensors& a) { return detail::instantiate_body(region->body, a); },
                     o)(all);
            return std::pair{Tensors(out.begin(), out.begin() + std::ptrdiff_t(nc)),
                             Tensors(out.begin() + std::ptrdiff_t(nc), out.end())};
        };
        ScanOptions so;
        so.reverse = r.reverse;
        if (ns == 0)
            so.length = r.length;
        so.name = r.name;
        ScanResult sr = scan(step, init, seqs, shared, so);
        Tensors results = region_results(nc > 0 ? sr.carry[0] : sr.outputs[0]);
        // stacked outputs and the carry history are [length, B, ...]
        for (size_t k = nc; k < results.size(); ++k)
            results[k] = detail::move_batch_axis_to_front(results[k], 1);
        return results;
    }

    /// The nodes op(inputs, attrs) for each attrs in `results`, run once per example by a map
    /// over the batched inputs (the unbatched ones are shared).
    Tensors loop(const Node& n, const BatchArgs& b, const std::vector<Attrs>& results) {
        Tensors seqs, shared;
        std::vector<std::pair<bool, size_t>> where;
        for (size_t i = 0; i < b.in.size(); ++i) {
            Tensors& to = b.batched[i] ? seqs : shared;
            where.emplace_back(b.batched[i], to.size());
            to.push_back(b.in[i]);
        }
        const Op op = n.op();
        auto body = [&](const Tensors&, const Tensors& args) {
            Tensors in;
            for (auto [batched, j] : where)
                in.push_back(batched ? args[j] : args[seqs.size() + j]);
            Tensors outs;
            for (const Attrs& a : results)
                outs.push_back(detail::make(op, in, a));
            return std::make_pair(Tensors{}, outs);
        };
        ScanOptions o;
        o.name = name_ + "(" + op_name(op) + ")";
        return scan(body, {}, seqs, shared, o).outputs;
    }

    std::string name_;
    int64_t size_;
    Tensor ref_;
    uint64_t mark_;
    std::unordered_map<const Node*, std::pair<Tensor, bool>> values_;
    std::map<detail::RegionKey, Tensors> regions_;
};

Tensors vmap_call(const VmapFn& fn, const VmapOptions& o, const Tensors& args) {
    const std::string name = o.name.empty() ? "vmap" : o.name;
    SJ_CHECK(o.in_axes.empty() || o.in_axes.size() == args.size(), Error)
        << name << ": " << o.in_axes.size() << " in_axes for " << args.size() << " arguments";
    int64_t size = -1;
    Tensor ref;
    Tensors per_example(args.size()), moved(args.size());
    std::string first;
    for (size_t i = 0; i < args.size(); ++i) {
        const Tensor& a = args[i];
        SJ_CHECK(a.defined(), Error) << name << ": argument " << i << " is an undefined tensor";
        BatchAxis ax = o.in_axes.empty() ? BatchAxis(0) : o.in_axes[i];
        if (!ax) {
            per_example[i] = a;
            continue;
        }
        const std::string what =
            name + ": argument " + std::to_string(i) + " (" + a.name() + ") " + a.type_str();
        SJ_CHECK(a.rank() >= 1, ShapeError) << what << " is 0-d and has no axis to map over";
        int64_t axis = normalize_batch_axis(*ax, a.rank(), what);
        moved[i] = detail::move_batch_axis_to_front(a, axis);
        int64_t d = a.shape()[axis];
        if (!ref.defined())
            first = what;
        SJ_CHECK(!ref.defined() || detail::dims_agree(size, d), ShapeError)
            << what << " has " << d << " elements along its batch axis " << axis << ", but "
            << first << " has " << size;
        if (!ref.defined() || (size < 0 && d >= 0)) {
            ref = moved[i];
            size = d;
        }
        Shape s(moved[i].shape().begin() + 1, moved[i].shape().end());
        per_example[i] =
            Placeholder(s, a.dtype(), a.name().empty() ? "vmap_arg" + std::to_string(i) : a.name());
    }
    SJ_CHECK(ref.defined(), Error) << name
                                   << ": no argument is mapped (every in_axes entry is "
                                      "not_mapped)";
    const uint64_t mark = detail::trace_mark();
    Tensors results = fn(per_example);
    {
        // a loop and its copy with residuals (gradients through a scan) batch as one loop
        std::vector<NodePtr> rs;
        for (const Tensor& t : results)
            if (t.defined())
                rs.push_back(t.node());
        if (rs.size() == results.size()) {
            rs = detail::merge_loop_copies(rs);
            for (size_t j = 0; j < results.size(); ++j)
                results[j] = Tensor(rs[j]);
        }
    }
    SJ_CHECK(o.out_axes.size() <= 1 || o.out_axes.size() == results.size(), Error)
        << name << ": " << o.out_axes.size() << " out_axes for " << results.size() << " results";

    Vmapper v(name, size, ref, mark);
    for (size_t i = 0; i < args.size(); ++i)
        if (moved[i].defined())
            v.bind(per_example[i].node().get(), moved[i]);
    std::vector<const Node*> roots;
    for (size_t j = 0; j < results.size(); ++j) {
        SJ_CHECK(results[j].defined(), Error)
            << name << ": the function returned an undefined tensor (result " << j << ")";
        roots.push_back(results[j].node().get());
    }
    v.run(topo_order(roots));

    BatchArgs b{*ref.node(), {}, {}, size, ref};
    Tensors out;
    for (size_t j = 0; j < results.size(); ++j) {
        auto [value, batched] = v.get(results[j].node().get());
        BatchAxis ax =
            o.out_axes.empty() ? BatchAxis(0) : o.out_axes[o.out_axes.size() == 1 ? 0 : j];
        if (!ax) {
            SJ_CHECK(!batched, ShapeError)
                << name << ": result " << j << " (" << results[j].name()
                << ") depends on the mapped arguments, but its out_axes entry is not_mapped";
            out.push_back(value);
            continue;
        }
        if (!batched)
            value = detail::broadcast_batch(b, value);
        out.push_back(detail::move_batch_axis(
            value,
            normalize_batch_axis(*ax, value.rank(),
                                 name + ": result " + std::to_string(j) + " " + value.type_str())));
    }
    return out;
}

} // namespace

VmapFn vmap(VmapFn fn, VmapOptions options) {
    SJ_CHECK(fn, Error) << "vmap: no function";
    return [fn = std::move(fn), o = std::move(options)](const Tensors& args) {
        return vmap_call(fn, o, args);
    };
}

std::function<Tensor(const Tensor&)> vmap(std::function<Tensor(const Tensor&)> fn,
                                          BatchAxis in_axis, BatchAxis out_axis) {
    SJ_CHECK(fn, Error) << "vmap: no function";
    VmapFn f = vmap([fn = std::move(fn)](const Tensors& a) { return Tensors{fn(a[0])}; },
                    VmapOptions{{in_axis}, {out_axis}, ""});
    return [f = std::move(f)](const Tensor& x) { return f({x})[0]; };
}

} // namespace sj
