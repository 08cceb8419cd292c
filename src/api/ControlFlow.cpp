// scan, map, fori_loop, while_loop, cond and switch_: tracing a body into a Region, and the
// gradients of regions (region_vjp, which vjp calls once per region).
#include "../ops/OpDef.h"

#include <symjax/Autodiff.h>
#include <symjax/ControlFlow.h>
#include <symjax/Graph.h>
#include <symjax/Ops.h>
#include <symjax/Variable.h>
#include <symjax/ir/ControlFlow.h>
#include <symjax/ir/Node.h>

#include <map>
#include <memory>
#include <mutex>
#include <unordered_set>

namespace sj {

namespace {

using detail::Body;
using detail::Region;
using detail::RegionKind;

/// A traced body: its Body, and the outer values its captured parameters stand for.
struct Closure {
    Body body;
    Tensors captured;
};

/// A body parameter of t's type.
Tensor param(const Shape& shape, DType dtype, const std::string& name) {
    return Placeholder(shape, dtype, name);
}
Tensors params_like(const Tensors& ts, const std::string& prefix) {
    Tensors out;
    for (size_t i = 0; i < ts.size(); ++i)
        out.push_back(param(ts[i].shape(), ts[i].dtype(), prefix + std::to_string(i)));
    return out;
}

/// Closes the traced `results` over `params`: every node they reach that does not depend on a
/// parameter (or on a `bound` placeholder, which stands for the outer value given with it) and
/// feeds one that does is captured: it becomes a parameter of the body, and its outer value an
/// input of the loop. Constants stay in the body. (Note [Structured ops].)

Closure close_over(const std::string& loop, const char* what, const Tensors& params,
                   const std::vector<std::pair<Tensor, Tensor>>& bound, const Tensors& results,
                   uint64_t mark) {
    std::vector<const Node*> roots;
    for (size_t i = 0; i < results.size(); ++i) {
        SJ_CHECK(results[i].defined(), Error)
            << loop << ": the " << what << " returned an undefined tensor (result " << i << ")";
        roots.push_back(results[i].node().get());
    }
    std::unordered_set<const Node*> inner;
    for (const auto& p : params)
        inner.insert(p.node().get());
    for (const auto& [ph, v] : bound)
        inner.insert(ph.node().get());
    const std::vector<const Node*> order = topo_order(roots);
    for (const Node* n : order) {
        if (inner.count(n))
            continue;
        for (const auto& i : n->inputs())
            if (inner.count(i.get())) {
                inner.insert(n);
                break;
            }
    }
    Closure c;
    Givens givens;
    std::unordered_set<const Node*> seen;
    auto capture = [&](const Node* x) {
        if (inner.count(x) || x->is(Op::Constant) || !seen.insert(x).second)
            return;
        Tensor outer(x->shared_from_this());
        Tensor ph = param(outer.shape(), outer.dtype(), x->name().empty() ? "captured" : x->name());
        givens.emplace_back(outer, ph);
        c.captured.push_back(outer);
    };
    for (const auto& [ph, v] : bound)
        c.captured.push_back(v);
    for (const Node* n : order) {
        // a draw made while tracing would be made once and reused by every step: refused
        SJ_CHECK(!has_trait(n->op(), kRandom) || n->id() < mark, Error)
            << loop << ": the " << what << " draws random numbers (" << n->describe()
            << "); random ops inside a loop body are not supported yet: draw them outside and pass "
               "them in as a sequence";
        if (!inner.count(n) || n->num_inputs() == 0)
            continue;
        for (const auto& i : n->inputs())
            capture(i.get());
    }
    for (const Node* r : roots)
        capture(r);
    Tensors body = givens.empty() ? results : clone(results, givens);
    for (const auto& p : params)
        c.body.params.push_back(p.node());
    for (const auto& [ph, v] : bound)
        c.body.params.push_back(ph.node());
    for (const auto& [outer, ph] : givens)
        c.body.params.push_back(ph.node());
    for (const auto& t : body)
        c.body.results.push_back(t.node());
    return c;
}

std::vector<std::pair<Tensor, Tensor>> bind_params(const Tensors& values,
                                                   const std::string& prefix) {
    std::vector<std::pair<Tensor, Tensor>> b;
    for (size_t i = 0; i < values.size(); ++i) {
        SJ_CHECK(values[i].defined(), Error) << prefix << " " << i << " is an undefined tensor";
        b.emplace_back(param(values[i].shape(), values[i].dtype(), prefix + std::to_string(i)),
                       values[i]);
    }
    return b;
}
Tensors placeholders_of(const std::vector<std::pair<Tensor, Tensor>>& b) {
    Tensors out;
    for (const auto& [ph, v] : b)
        out.push_back(ph);
    return out;
}

void check_defined(const Tensors& ts, const std::string& loop, const char* what) {
    for (size_t i = 0; i < ts.size(); ++i)
        SJ_CHECK(ts[i].defined(), Error)
            << loop << ": " << what << " " << i << " is an undefined tensor";
}

/// Every result of region r applied to `inputs`, one node each (Note [Structured ops]).
Tensors region_nodes(Op op, const std::shared_ptr<const Region>& r, const Tensors& inputs) {
    std::vector<NodePtr> ins;
    for (const auto& t : inputs)
        ins.push_back(t.node());
    Tensors out;
    for (int k = 0; k < r->num_results(); ++k)
        out.emplace_back(Node::make(op, RegionAttrs{r, k}, ins));
    return out;
}

Tensors concat(Tensors a, const Tensors& b) {
    a.insert(a.end(), b.begin(), b.end());
    return a;
}
Tensors part(const Tensors& ts, size_t begin, size_t count) {
    return {ts.begin() + std::ptrdiff_t(begin), ts.begin() + std::ptrdiff_t(begin + count)};
}
Tensors inputs_of(const Node& n) {
    Tensors out;
    for (const auto& i : n.inputs())
        out.emplace_back(i);
    return out;
}

} // namespace

namespace {

// Note [Scan checkpointing]
// A scan with checkpoint_every = k over n steps is built as two nested scans: an outer scan over
// the n / k segments whose body is the user's scan over the k steps of one segment (the
// sequences reshaped to [n / k, k, ...]), then, when k does not divide n, a plain scan over the
// last n % k steps (first when reversed). Autodiff needs no change: the outer scan stores only
// the carry each segment received, and its backward step runs the outer body again (Note
// [Gradients of regions]), which runs the inner scan forward from that carry and stores that
// segment's k carries for the inner backward scan, then drops them.
//
// Note [Scan unrolling]
// unroll = k is the same outer scan over blocks of k steps, whose body calls the step function
// k times in a row (slice j of each block's sequences, from the last when reversed) and stacks
// their outputs, instead of running an inner scan: the loop makes n / k iterations, and each
// iteration's body is k steps' worth of graph, which fusion turns into as many kernels as one
// step's (elementwise chains through the k steps fuse). The forward results are the plain
// scan's bit for bit on the reference backend; gradients add their per-step terms block by
// block, the same to rounding (ControlFlow.ScanUnrollGivesTheSameResults).
ScanResult segmented_scan(const ScanFn& fn, const Tensors& init, const Tensors& sequences,
                          const Tensors& non_sequences, const ScanOptions& o,
                          const std::string& name, bool unrolled) {
    const int64_t k = unrolled ? o.unroll : o.checkpoint_every;
    const char* what = unrolled ? "unroll" : "checkpoint_every";
    int64_t n = o.length ? *o.length : -1;
    for (const auto& s : sequences)
        if (s.shape()[0] >= 0) n = s.shape()[0];
    SJ_CHECK(n >= 0, ShapeError) << name << ": " << what
                                 << " needs the number of steps when the graph is built; the "
                                 << "sequences' first dim is unknown (-1)";
    const int64_t segments = n / k, tail = n % k;
    // the scans of one segment and of the tail: plain when unrolling, unrolled when checkpointing
    ScanOptions inner{.reverse = o.reverse, .name = name, .unroll = unrolled ? 1 : o.unroll};
    if (segments == 0) { // fewer steps than a segment
        inner.length = n;
        return scan(fn, init, sequences, non_sequences, inner);
    }
    Tensors carry = init, head_out, tail_out;
    auto run_tail = [&] {
        if (tail == 0) return;
        Tensors seqs;
        for (const auto& s : sequences) seqs.push_back(slice_axis(s, 0, segments * k, n));
        ScanOptions t = inner;
        t.length = tail;
        ScanResult r = scan(fn, carry, seqs, non_sequences, t);
        carry = r.carry;
        tail_out = r.outputs;
    };
    if (o.reverse) run_tail();
    {
        Tensors seqs;
        for (const auto& s : sequences) {
            Tensor head = tail == 0 ? s : slice_axis(s, 0, 0, segments * k);
            Shape shape{segments, k};
            shape.insert(shape.end(), s.shape().begin() + 1, s.shape().end());
            seqs.push_back(reshape(head, shape));
        }
        ScanFn segment = [&](const Tensors& c, const Tensors& args) {
            Tensors slices(args.begin(), args.begin() + std::ptrdiff_t(sequences.size()));
            if (!unrolled) {
                ScanOptions in = inner;
                in.length = k;
                ScanResult r = scan(fn, c, slices, non_sequences, in);
                return std::pair{r.carry, r.outputs};
            }
            Tensors cur = c;
            std::vector<Tensors> outs(static_cast<size_t>(k));
            for (int64_t s = 0; s < k; ++s) {
                const int64_t j = o.reverse ? k - 1 - s : s;
                Tensors step_args;
                for (const auto& x : slices)
                    step_args.push_back(x[j]);
                step_args.insert(step_args.end(), non_sequences.begin(), non_sequences.end());
                auto [next, y] = fn(cur, step_args);
                SJ_CHECK(next.size() == cur.size(), Error)
                    << name << ": the body returns " << next.size() << " carries, init has "
                    << cur.size();
                SJ_CHECK(s == 0 || y.size() == outs[size_t(o.reverse ? j + 1 : j - 1)].size(),
                         Error)
                    << name << ": the body returns a different number of outputs from step to step";
                cur = next;
                outs[size_t(j)] = y;
            }
            Tensors stacked;
            for (size_t m = 0; m < outs[0].size(); ++m) {
                Tensors column;
                for (const auto& step : outs)
                    column.push_back(step[m]);
                stacked.push_back(stack(column, 0));
            }
            return std::pair{cur, stacked};
        };
        ScanOptions outer{.length = segments,
                          .reverse = o.reverse,
                          .name = name + (unrolled ? "_unrolled" : "_segments")};
        ScanResult r = scan(segment, carry, seqs, {}, outer);
        carry = r.carry;
        for (const auto& y : r.outputs) {
            Shape shape{segments * k};
            shape.insert(shape.end(), y.shape().begin() + 2, y.shape().end());
            head_out.push_back(reshape(y, shape));
        }
    }
    if (!o.reverse) run_tail();
    if (tail == 0) return {carry, head_out};
    Tensors outs;
    for (size_t j = 0; j < head_out.size(); ++j) outs.push_back(sj::concat(Tensors{head_out[j], tail_out[j]}, 0));
    return {carry, outs};
}

} // namespace

ScanResult scan(const ScanFn& fn, const Tensors& init, const Tensors& sequences,
                const Tensors& non_sequences, const ScanOptions& o) {
    const std::string name = o.name.empty() ? "scan" : o.name;
    SJ_CHECK(o.checkpoint_every >= 0, ShapeError)
        << name << ": checkpoint_every " << o.checkpoint_every << " is negative";
    SJ_CHECK(o.unroll >= 1, ShapeError) << name << ": unroll " << o.unroll << " must be >= 1";
    if (o.checkpoint_every > 0 || o.unroll > 1) {
        SJ_CHECK(fn, Error) << name << ": no body function";
        check_defined(sequences, name, "sequence");
        for (const auto& s : sequences)
            SJ_CHECK(s.rank() >= 1, ShapeError)
                << name << ": sequence " << s.name() << " is 0-d; a sequence is scanned along its "
                << "first dim";
        return segmented_scan(fn, init, sequences, non_sequences, o, name, o.checkpoint_every == 0);
    }
    SJ_CHECK(fn, Error) << name << ": no body function";
    check_defined(init, name, "init carry");
    check_defined(sequences, name, "sequence");
    SJ_CHECK(!sequences.empty() || o.length, ShapeError)
        << name << ": without sequences the number of steps must be given (ScanOptions::length)";
    SJ_CHECK(!o.length || *o.length >= 0, ShapeError)
        << name << ": length " << *o.length << " is negative";
    Tensors slices;
    for (size_t i = 0; i < sequences.size(); ++i) {
        const Tensor& s = sequences[i];
        SJ_CHECK(s.rank() >= 1, ShapeError)
            << name << ": sequence " << i << " (" << s.name() << ") is a 0-d " << s.type_str()
            << "; a sequence is scanned along its first dim";
        SJ_CHECK(!o.length || detail::dims_agree(s.shape()[0], *o.length), ShapeError)
            << name << ": sequence " << i << " (" << s.name() << ") " << s.type_str() << " has "
            << s.shape()[0] << " steps, the length given is " << *o.length;
        slices.push_back(param(Shape(s.shape().begin() + 1, s.shape().end()), s.dtype(),
                               "slice" + std::to_string(i)));
    }
    const uint64_t mark = detail::trace_mark();
    Tensors carry = params_like(init, "carry");
    auto bound = bind_params(non_sequences, "non_sequence");
    auto [next, outs] = fn(carry, concat(slices, placeholders_of(bound)));
    SJ_CHECK(next.size() == init.size(), Error)
        << name << ": the body returns " << next.size() << " carries, init has " << init.size();
    Closure c = close_over(name, "body", concat(carry, slices), bound, concat(next, outs), mark);
    auto r = std::make_shared<Region>();
    r->kind = RegionKind::Scan;
    r->name = name;
    r->carries = int(init.size());
    r->sequences = int(sequences.size());
    r->outputs = int(outs.size());
    r->captured = int(c.captured.size());
    r->length = o.length ? *o.length : -1;
    r->reverse = o.reverse;
    r->body = std::move(c.body);
    Tensors all = region_nodes(Op::Scan, r, concat(concat(init, sequences), c.captured));
    return {part(all, 0, init.size()), part(all, init.size(), outs.size())};
}

Tensor map(const MapFn& fn, const Tensors& sequences, const Tensors& non_sequences) {
    SJ_CHECK(!sequences.empty(), ShapeError) << "map: no sequences to map over";
    ScanFn step = [&](const Tensors&, const Tensors& args) {
        return std::pair{Tensors{}, Tensors{fn(args)}};
    };
    return scan(step, {}, sequences, non_sequences, {.name = "map"}).outputs[0];
}

Tensors fori_loop(int64_t lower, int64_t upper, const ForiFn& fn, const Tensors& init) {
    const int64_t n = std::max<int64_t>(0, upper - lower);
    Tensor index = arange(double(lower), double(lower + n), 1, DType::I64);
    ScanFn step = [&](const Tensors& carry, const Tensors& args) {
        return std::pair{fn(args[0], carry), Tensors{}};
    };
    return scan(step, init, {index}, {}, {.name = "fori_loop"}).carry;
}

Tensors while_loop(const CondFn& cond_fn, const BodyFn& body_fn, const Tensors& loop_vars,
                   const Tensors& non_sequences, const WhileOptions& o) {
    const std::string name = o.name.empty() ? "while_loop" : o.name;
    SJ_CHECK(cond_fn && body_fn, Error) << name << ": no condition or body function";
    SJ_CHECK(!loop_vars.empty(), Error) << name << ": no loop variables";
    check_defined(loop_vars, name, "loop variable");
    SJ_CHECK(!o.max_iterations || *o.max_iterations >= 0, ShapeError)
        << name << ": max_iterations " << *o.max_iterations << " is negative";
    const uint64_t mark = detail::trace_mark();
    Tensors vars = params_like(loop_vars, "var");
    auto bound = bind_params(non_sequences, "non_sequence");
    Tensors next = body_fn(vars, placeholders_of(bound));
    SJ_CHECK(next.size() == loop_vars.size(), Error)
        << name << ": the body returns " << next.size() << " loop variables, " << loop_vars.size()
        << " were given";
    Closure body = close_over(name, "body", vars, bound, next, mark);
    Tensors cvars = params_like(loop_vars, "var");
    auto cbound = bind_params(non_sequences, "non_sequence");
    Tensor go = cond_fn(cvars, placeholders_of(cbound));
    SJ_CHECK(go.defined(), Error) << name << ": the condition returned an undefined tensor";
    SJ_CHECK(go.dtype() == DType::Bool && go.rank() == 0, TypeError)
        << name << ": the condition must return a bool scalar, got " << go.type_str()
        << "; compare or reduce it (e.g. x < 5, any(x))";
    Closure cond = close_over(name, "condition", cvars, cbound, {go}, mark);
    auto r = std::make_shared<Region>();
    r->kind = RegionKind::While;
    r->name = name;
    r->carries = int(loop_vars.size());
    r->captured = int(body.captured.size());
    r->captured2 = int(cond.captured.size());
    r->max_iterations = o.max_iterations ? *o.max_iterations : -1;
    r->body = std::move(body.body);
    r->body2 = std::move(cond.body);
    Tensors all =
        region_nodes(Op::WhileLoop, r, concat(concat(loop_vars, body.captured), cond.captured));
    return part(all, 0, loop_vars.size());
}

Tensor trip_count(const Tensor& result) {
    SJ_CHECK(result.defined() && result.node()->is(Op::WhileLoop), Error)
        << "trip_count: " << (result.defined() ? result.name() : std::string("undefined tensor"))
        << " is not a result of a while_loop";
    const auto& a = result.node()->attr<RegionAttrs>();
    return Tensor(Node::make(Op::WhileLoop, RegionAttrs{a.region, a.region->carries},
                             result.node()->inputs()));
}

Tensors cond(const Tensor& pred, const BranchFn& true_fn, const BranchFn& false_fn,
             const Tensors& operands) {
    const std::string name = "cond";
    SJ_CHECK(true_fn && false_fn, Error) << name << ": a branch function is missing";
    SJ_CHECK(pred.defined(), Error) << name << ": undefined predicate";
    SJ_CHECK(pred.dtype() == DType::Bool && pred.rank() == 0, TypeError)
        << name << ": the predicate " << pred.name() << " must be a bool scalar, got "
        << pred.type_str() << "; compare or reduce it first (e.g. x > 0, any(x))";
    check_defined(operands, name, "operand");
    // a branch runs at most once per call: a random draw in it is drawn once per call, as outside
    const uint64_t mark = UINT64_MAX;
    Tensors a = params_like(operands, "operand"), b = params_like(operands, "operand");
    Tensors ra = true_fn(a), rb = false_fn(b);
    SJ_CHECK(ra.size() == rb.size(), Error) << name << ": the true branch returns " << ra.size()
                                            << " tensors, the false branch " << rb.size();
    Closure ca = close_over(name, "true branch", a, {}, ra, mark);
    Closure cb = close_over(name, "false branch", b, {}, rb, mark);
    auto r = std::make_shared<Region>();
    r->kind = RegionKind::Cond;
    r->name = name;
    r->carries = int(operands.size());
    r->outputs = int(ra.size());
    r->captured = int(ca.captured.size());
    r->captured2 = int(cb.captured.size());
    r->body = std::move(ca.body);
    r->body2 = std::move(cb.body);
    return region_nodes(Op::Cond, r,
                        concat(concat(concat({pred}, operands), ca.captured), cb.captured));
}

Tensors switch_(const Tensor& index, const std::vector<BranchFn>& branches,
                const Tensors& operands) {
    SJ_CHECK(!branches.empty(), Error) << "switch_: no branches";
    SJ_CHECK(index.defined() && index.rank() == 0 && is_int(index.dtype()), TypeError)
        << "switch_: the index must be an integer scalar, got "
        << (index.defined() ? index.type_str() : std::string("an undefined tensor"));
    // branch k when index <= k (k < last), else the last: index clamped to the branches
    std::function<Tensors(size_t, const Tensors&)> from = [&](size_t k,
                                                              const Tensors& ops) -> Tensors {
        if (k + 1 == branches.size())
            return branches[k](ops);
        return cond(
            index <= double(k), branches[k], [&, k](const Tensors& x) { return from(k + 1, x); },
            ops);
    };
    return from(0, operands);
}

// ---- gradients
// -----------------------------------------------------------------------------------

namespace detail {

namespace {

/// The body's results with its parameters replaced by `args` (a copy of the body in the caller's
/// graph: the backward body differentiates it).
Tensors instantiate(const Body& b, const Tensors& args) {
    Givens g;
    for (size_t i = 0; i < b.params.size(); ++i)
        g.emplace_back(Tensor(b.params[i]), args[i]);
    Tensors results;
    for (const auto& r : b.results)
        results.emplace_back(r);
    return clone(results, g);
}

} // namespace

Tensors instantiate_body(const Body& b, const Tensors& args) { return instantiate(b, args); }

uint64_t trace_mark() { return scalar(0.0).node()->id(); }

namespace {

/// vjp of `outs` (with cotangents `cots`, undefined: none) with respect to the float tensors of
/// `wrt`; the others get an undefined entry.
Tensors vjp_float(const Tensors& outs, const Tensors& cots, const Tensors& wrt) {
    Tensors o, c, w;
    std::vector<size_t> where;
    for (size_t i = 0; i < outs.size(); ++i)
        if (cots[i].defined() && is_float(outs[i].dtype()))
            o.push_back(outs[i]), c.push_back(cots[i]);
    for (size_t i = 0; i < wrt.size(); ++i)
        if (is_float(wrt[i].dtype()))
            w.push_back(wrt[i]), where.push_back(i);
    Tensors d(wrt.size());
    if (w.empty())
        return d;
    Tensors r = o.empty() ? Tensors{} : vjp(o, c, w);
    for (size_t k = 0; k < where.size(); ++k)
        d[where[k]] = o.empty() ? zeros_like(w[k]) : r[k];
    return d;
}

Tensor or_zeros(const Tensor& g, const Tensor& like) {
    return g.defined() ? g : zeros_like(like);
}

/// Indices of the float tensors of ts.
std::vector<size_t> floats(const Tensors& ts) {
    std::vector<size_t> out;
    for (size_t i = 0; i < ts.size(); ++i)
        if (is_float(ts[i].dtype()))
            out.push_back(i);
    return out;
}

// Note [Gradients of regions]
// A scan's backward pass is a scan in the other direction over the same steps. Its carry is the
// cotangent of the forward carry plus an accumulator per captured float tensor; its sequences
// are the carry history (the carry each forward step received: a result of the forward region
// that only gradients ask for), the forward sequences and the cotangents of the stacked
// outputs and of the history itself (second order differentiates the history). Each backward
// step runs the forward body again on the stored carry and takes its vjp, so the backward body
// is an ordinary traced body and the backward scan is differentiable in turn: second order and
// jvp (vjp of a vjp) come for free. A while_loop's backward pass is a while_loop that counts
// the recorded trip count down, reading the history with a dynamic index; it needs the
// forward's max_iterations to size the history. A cond's is a cond on the same predicate whose
// branches take the vjp of the forward branches (zeros for the other branch's captures).

// Note [Scan residuals]
// Recomputing the forward body in each backward step (Note [Gradients of regions]) is cheap
// for elementwise work but not for a matrix product: an LSTM's backward step would redo the
// gates' `h @ W_hh` beside the two products of its own vjp. So the matrix products and
// convolutions of the body whose values the vjp reads (through a nonlinearity after them) and
// that vary from step to step are stored by the forward pass instead, as JAX's partial
// evaluation of a scan stores its residuals:
//
//  - with_residuals(r) is a copy of r whose body also returns those values as extra stacked
//    outputs, with `base` = r. The choice looks at the body's own vjp (with every float
//    cotangent present), so one copy serves every gradient taken of r (cached per region).
//  - The backward scan reads the copy's history and residuals as sequences, instantiates the
//    copy's body and takes the vjp as before, then replaces each recomputed product by its
//    stored slice (clone with givens). The product's own vjp (g @ W^T, h^T @ g) does not read
//    its value, so the recomputed product is dead code and fusion never sees it.
//  - The primal graph still reads r's nodes. merge_loops (src/compiler/MergeLoops.cpp) turns
//    them into the copy's nodes when both loops have the same inputs, so the loop runs once;
//    where that pass does not run (the reference interpreter) both run, with the same values.
//
// The backward body is the same function of the stored values as before, so second order
// (which differentiates the backward scan, and through the stored slices the copy's forward)
// and jvp stay exact. The cost is memory: length x the products' size (an LSTM's gates, 4x
// its hidden state per step), the same order as the carry history already kept; a scan with
// checkpoint_every keeps them for one segment at a time.

/// Whether a body node is worth storing: a library call (its recomputation costs a product).
bool stored_kind(const Node& n) {
    return n.is(Op::DotGeneral) || n.is(Op::Conv) || n.is(Op::ConvBackwardData) ||
           n.is(Op::ConvBackwardFilter);
}

/// r with its residuals as extra step outputs, or null when its backward pass reads none
/// (Note [Scan residuals]).
std::shared_ptr<const Region> with_residuals(const std::shared_ptr<const Region>& rp) {
    // one entry per differentiated region while it lives (its address is not reused before)
    struct Entry {
        std::weak_ptr<const Region> base, copy;
        bool none = false; // r has no residuals
    };
    static std::mutex mu;
    static std::map<const Region*, Entry> cache;
    {
        std::lock_guard<std::mutex> lock(mu);
        if (auto it = cache.find(rp.get()); it != cache.end() && !it->second.base.expired()) {
            if (it->second.none)
                return nullptr;
            if (auto r2 = it->second.copy.lock())
                return r2;
        }
    }
    // (unlocked: the body's vjp below takes the vjp of the loops nested in it, which come here)
    const Region& r = *rp;
    const size_t c = size_t(r.carries), q = size_t(r.sequences), o = size_t(r.outputs);
    // values that vary by step: those reached from a carry or a sequence slice
    std::unordered_set<const Node*> varying;
    for (size_t i = 0; i < c + q; ++i)
        varying.insert(r.body.params[i].get());
    std::vector<const Node*> roots;
    for (const auto& x : r.body.results)
        roots.push_back(x.get());
    std::vector<const Node*> candidates;
    for (const Node* x : topo_order(roots)) {
        for (const auto& i : x->inputs())
            if (varying.count(i.get())) {
                varying.insert(x);
                break;
            }
        if (stored_kind(*x) && varying.count(x))
            candidates.push_back(x);
    }
    std::vector<const Node*> read;
    if (!candidates.empty()) {
        Tensors res, cots, wrt;
        for (size_t k = 0; k < c + o; ++k) {
            res.emplace_back(r.body.results[k]);
            cots.push_back(is_float(res[k].dtype())
                               ? Tensor(param(res[k].shape(), res[k].dtype(), "cotangent"))
                               : Tensor());
        }
        for (const auto& p : r.body.params)
            wrt.emplace_back(p);
        const Tensors ds = vjp_float(res, cots, wrt); // (alive while its nodes are walked)
        std::vector<const Node*> grads;
        for (const Tensor& d : ds)
            if (d.defined())
                grads.push_back(d.node().get());
        std::unordered_set<const Node*> reached;
        for (const Node* x : topo_order(grads))
            reached.insert(x);
        for (const Node* x : candidates)
            if (reached.count(x))
                read.push_back(x);
    }
    std::shared_ptr<Region> r2;
    if (!read.empty()) {
        r2 = std::make_shared<Region>(r);
        r2->base = rp;
        auto at = r2->body.results.begin() + std::ptrdiff_t(c + o);
        for (const Node* x : read)
            at = r2->body.results.insert(at, x->shared_from_this()) + 1;
        r2->outputs = int(o + read.size());
    }
    std::lock_guard<std::mutex> lock(mu);
    for (auto it = cache.begin(); it != cache.end();)
        it = it->second.base.expired() ? cache.erase(it) : std::next(it);
    // another thread may have made one meanwhile: every gradient of r shares one copy
    Entry& e = cache[rp.get()];
    if (e.base.lock() == rp) {
        if (e.none)
            return nullptr;
        if (auto other = e.copy.lock())
            return other;
    }
    e = {rp, r2, r2 == nullptr};
    return r2;
}

Tensors scan_vjp(const Node& n, const Region& r, const Tensors& cot) {
    const Tensors in = inputs_of(n);
    const size_t c = size_t(r.carries), q = size_t(r.sequences), o = size_t(r.outputs),
                 m = size_t(r.captured);
    const Tensors init = part(in, 0, c), seqs = part(in, c, q), cap = part(in, c + q, m);
    const auto fc = floats(init), fcap = floats(cap), fseq = floats(seqs);
    // the forward values the backward steps read come from r's copy with residuals, if any
    const std::shared_ptr<const Region> r2 = with_residuals(n.attr<RegionAttrs>().region);
    const std::shared_ptr<const Region>& fr = r2 ? r2 : n.attr<RegionAttrs>().region;
    const size_t nres = size_t(fr->outputs) - o;
    Tensors hist, stored;
    for (size_t i = 0; i < c; ++i)
        hist.emplace_back(Node::make(
            Op::Scan, RegionAttrs{fr, int64_t(c + size_t(fr->outputs) + i)}, n.inputs()));
    for (size_t j = 0; j < nres; ++j)
        stored.emplace_back(Node::make(Op::Scan, RegionAttrs{fr, int64_t(c + o + j)}, n.inputs()));
    // backward sequences: history (all carries), forward sequences, defined stacked-output and
    // history cotangents
    std::vector<size_t> gys, ghs;
    for (size_t k = 0; k < o; ++k)
        if (cot[c + k].defined())
            gys.push_back(k);
    for (size_t i : fc)
        if (cot[c + o + i].defined())
            ghs.push_back(i);
    Tensors bseqs = concat(hist, seqs);
    for (size_t k : gys)
        bseqs.push_back(cot[c + k]);
    for (size_t i : ghs)
        bseqs.push_back(cot[c + o + i]);
    bseqs = concat(bseqs, stored);
    Tensors binit;
    for (size_t i : fc)
        binit.push_back(or_zeros(cot[i], init[i]));
    for (size_t j : fcap)
        binit.push_back(zeros_like(cap[j]));
    ScanFn step = [&](const Tensors& carry, const Tensors& args) {
        const Tensors c_t = part(args, 0, c), x_t = part(args, c, q);
        const Tensors gy_t = part(args, c + q, gys.size()),
                      gh_t = part(args, c + q + gys.size(), ghs.size());
        const Tensors s_t = part(args, c + q + gys.size() + ghs.size(), nres);
        const Tensors cap_t = part(args, c + q + gys.size() + ghs.size() + nres, m);
        const Tensors all = instantiate(fr->body, concat(concat(c_t, x_t), cap_t));
        const Tensors res = part(all, 0, c + o);
        Tensors cots(res.size());
        for (size_t k = 0; k < fc.size(); ++k)
            cots[fc[k]] = carry[k];
        for (size_t k = 0; k < gys.size(); ++k)
            cots[c + gys[k]] = gy_t[k];
        Tensors d = vjp_float(res, cots, concat(concat(c_t, x_t), cap_t));
        Tensors next;
        for (size_t i : fc) {
            Tensor g = or_zeros(d[i], c_t[i]);
            for (size_t k = 0; k < ghs.size(); ++k)
                if (ghs[k] == i)
                    g = g + gh_t[k];
            next.push_back(g);
        }
        for (size_t k = 0; k < fcap.size(); ++k)
            next.push_back(carry[fc.size() + k] + or_zeros(d[c + q + fcap[k]], cap_t[fcap[k]]));
        Tensors ys;
        for (size_t s : fseq)
            ys.push_back(or_zeros(d[c + s], x_t[s]));
        if (nres == 0)
            return std::pair{next, ys};
        // the stored products in place of the recomputed ones (Note [Scan residuals])
        Givens stored_values;
        for (size_t j = 0; j < nres; ++j)
            stored_values.emplace_back(all[c + o + j], s_t[j]);
        const Tensors out = clone(concat(next, ys), stored_values);
        return std::pair{part(out, 0, next.size()), part(out, next.size(), ys.size())};
    };
    ScanOptions so{.reverse = !r.reverse, .name = r.name + "_grad"};
    if (bseqs.empty())
        so.length = r.length;
    ScanResult b = scan(step, binit, bseqs, cap, so);
    Tensors din(in.size());
    for (size_t k = 0; k < fc.size(); ++k)
        din[fc[k]] = b.carry[k];
    for (size_t k = 0; k < fseq.size(); ++k)
        din[c + fseq[k]] = b.outputs[k];
    for (size_t k = 0; k < fcap.size(); ++k)
        din[c + q + fcap[k]] = b.carry[fc.size() + k];
    return din;
}

Tensors while_vjp(const Node& n, const Region& r, const Tensors& cot) {
    SJ_CHECK(r.max_iterations >= 0, Error)
        << r.name
        << ": gradients through a while_loop need WhileOptions::max_iterations (the carries the "
           "backward pass reads are stored in a buffer of that many rows)";
    const Tensors in = inputs_of(n);
    const size_t c = size_t(r.carries), m = size_t(r.captured);
    const Tensors init = part(in, 0, c), cap = part(in, c, m);
    const auto fc = floats(init), fcap = floats(cap);
    const auto& region = n.attr<RegionAttrs>().region;
    Tensors hist;
    for (size_t i = 0; i < c; ++i)
        hist.emplace_back(
            Node::make(Op::WhileLoop, RegionAttrs{region, int64_t(c + 1 + i)}, n.inputs()));
    Tensor trips(Node::make(Op::WhileLoop, RegionAttrs{region, int64_t(c)}, n.inputs()));
    std::vector<size_t> ghs;
    for (size_t i : fc)
        if (cot[c + 1 + i].defined())
            ghs.push_back(i);
    Tensors gh;
    for (size_t i : ghs)
        gh.push_back(cot[c + 1 + i]);
    Tensors vars{trips - 1.0};
    for (size_t i : fc)
        vars.push_back(or_zeros(cot[i], init[i]));
    for (size_t j : fcap)
        vars.push_back(zeros_like(cap[j]));
    CondFn go = [](const Tensors& v, const Tensors&) { return v[0] >= 0.0; };
    BodyFn step = [&](const Tensors& v, const Tensors& ns) {
        const Tensor k = v[0];
        const Tensors h = part(ns, 0, c), cap_t = part(ns, c, m),
                      gh_t = part(ns, c + m, ghs.size());
        Tensors c_k;
        for (size_t i = 0; i < c; ++i)
            c_k.push_back(h[i][k]);
        Tensors res = instantiate(r.body, concat(c_k, cap_t));
        Tensors cots(res.size());
        for (size_t q = 0; q < fc.size(); ++q)
            cots[fc[q]] = v[1 + q];
        Tensors d = vjp_float(res, cots, concat(c_k, cap_t));
        Tensors next{k - 1.0};
        for (size_t i : fc) {
            Tensor g = or_zeros(d[i], c_k[i]);
            for (size_t q = 0; q < ghs.size(); ++q)
                if (ghs[q] == i)
                    g = g + gh_t[q][k];
            next.push_back(g);
        }
        for (size_t q = 0; q < fcap.size(); ++q)
            next.push_back(v[1 + fc.size() + q] + or_zeros(d[c + fcap[q]], cap_t[fcap[q]]));
        return next;
    };
    Tensors b = while_loop(go, step, vars, concat(concat(hist, cap), gh),
                           {.max_iterations = r.max_iterations, .name = r.name + "_grad"});
    Tensors din(in.size());
    for (size_t q = 0; q < fc.size(); ++q)
        din[fc[q]] = b[1 + q];
    for (size_t q = 0; q < fcap.size(); ++q)
        din[c + fcap[q]] = b[1 + fc.size() + q];
    return din;
}

Tensors cond_vjp(const Node& n, const Region& r, const Tensors& cot) {
    const Tensors in = inputs_of(n);
    const size_t c = size_t(r.carries), m1 = size_t(r.captured), m2 = size_t(r.captured2),
                 o = size_t(r.outputs);
    const Tensors ops = part(in, 1, c), cap1 = part(in, 1 + c, m1), cap2 = part(in, 1 + c + m1, m2);
    std::vector<size_t> gk;
    for (size_t k = 0; k < o; ++k)
        if (cot[k].defined())
            gk.push_back(k);
    Tensors gs;
    for (size_t k : gk)
        gs.push_back(cot[k]);
    const Tensors wrt = concat(concat(ops, cap1), cap2);
    const auto fw = floats(wrt);
    // operands of the backward cond: the forward operands and captures, then the cotangents
    auto branch = [&](bool first) {
        return [&, first](const Tensors& x) {
            const Tensors xo = part(x, 0, c), x1 = part(x, c, m1), x2 = part(x, c + m1, m2);
            const Tensors g = part(x, c + m1 + m2, gk.size());
            Tensors res = instantiate(first ? r.body : r.body2, concat(xo, first ? x1 : x2));
            Tensors cots(res.size());
            for (size_t k = 0; k < gk.size(); ++k)
                cots[gk[k]] = g[k];
            Tensors own = concat(xo, first ? x1 : x2);
            Tensors d = vjp_float(res, cots, own);
            Tensors all = concat(concat(xo, x1), x2);
            Tensors out;
            for (size_t i : fw) {
                // position i of (operands, captures of true, captures of false)
                Tensor di;
                if (i < c)
                    di = d[i];
                else if (first && i < c + m1)
                    di = d[i];
                else if (!first && i >= c + m1)
                    di = d[i - m1];
                out.push_back(or_zeros(di, all[i]));
            }
            return out;
        };
    };
    Tensors b = cond(Tensor(n.input(0)), branch(true), branch(false), concat(wrt, gs));
    Tensors din(in.size());
    for (size_t k = 0; k < fw.size(); ++k)
        din[1 + fw[k]] = b[k];
    return din;
}

} // namespace

std::vector<Tensor> region_vjp(const Node& n, const std::vector<Tensor>& cotangents) {
    const Region& r = *n.attr<RegionAttrs>().region;
    switch (r.kind) {
    case RegionKind::Scan:
        return scan_vjp(n, r, cotangents);
    case RegionKind::While:
        return while_vjp(n, r, cotangents);
    case RegionKind::Cond:
        return cond_vjp(n, r, cotangents);
    }
    return {};
}

} // namespace detail
} // namespace sj
