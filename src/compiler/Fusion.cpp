// Fusion: producer-consumer grouping in reverse topological order, then sibling merging.
#include "Fusion.h"

#include "../core/NodeMap.h"
#include "../ops/OpDef.h"

#include <symjax/ir/Attrs.h>
#include <symjax/ir/Node.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <iterator>
#include <map>
#include <set>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

namespace sj::compiler {

const char* kind_name(Group::Kind k) {
    switch (k) {
    case Group::Kind::Kernel: return "kernel";
    case Group::Kind::Dot: return "dot";
    case Group::Kind::Window: return "window";
    case Group::Kind::View: return "view";
    case Group::Kind::Fallback: return "reference";
    }
    return "?";
}

size_t FusionPlan::kernels() const {
    return std::count_if(groups.begin(), groups.end(),
                         [](const Group& g) { return g.kind == Group::Kind::Kernel; });
}
size_t FusionPlan::post_ops() const {
    size_t n = 0;
    for (const auto& g : groups) n += g.epilogue.size();
    return n;
}
size_t FusionPlan::library_calls() const {
    return std::count_if(groups.begin(), groups.end(),
                         [](const Group& g) {
                             return g.kind == Group::Kind::Dot || g.kind == Group::Kind::Window;
                         });
}

const PostOp* sum_post_op(const std::vector<PostOp>& epilogue) {
    for (const PostOp& p : epilogue)
        if (p.kind == PostOp::Kind::Sum)
            return &p;
    return nullptr;
}

std::string PostOp::str() const {
    std::ostringstream os;
    switch (kind) {
    case Kind::Binary: os << op_name(op) << (per_channel ? "[channel]" : "[1]"); break;
    case Kind::Relu: os << "relu"; if (alpha != 0) os << "(" << alpha << ")"; break;
    case Kind::Linear: os << "linear(" << alpha << ", " << beta << ")"; break;
    case Kind::Sum:
        os << "sum(" << alpha << ")";
        break;
    }
    return os.str();
}

// Note [Epilogue fusion]
// A convolution or an f32 matmul is followed by elementwise ops in most networks: a bias add,
// batch norm in eval mode (sub, mul, mul, add by per-channel vectors), relu (max(x, 0), or
// nn::relu's where(x <= 0, 0, x)), leaky relu (where(x <= 0, x * s, x)). As separate kernels they
// read the library call's result back from memory; oneDNN applies them inside the call, on the
// result while it is in cache, as post-ops (binary add/sub/mul/max/min with a per-channel or
// one-value operand, eltwise relu and linear). So before grouping, fusion walks from each f32 conv
// / dot_general down its chain of single consumers:
//
//   y = conv(x, w)          group (window): conv(x, w)
//   a = y - mean[C]           post-ops: sub[channel] mul[channel] add[channel] relu
//   b = a * scale[C]    ->    materialises r; mean, scale and bias are loaded from their
//   c = b + bias[C]           buffers, which groups before it materialise
//   r = max(c, 0)
//
// An op joins while the value so far has exactly one reader (that op; a relu select's compare,
// where and mul count as one) and is no function output, and the op's other operand is a scalar
// constant or a buffer broadcast along every dim but the channels. The target says which calls take
// an epilogue and where their channels are (Target::epilogue; the cpu target: conv's dim 1, or dims
// 1 and the last of a channel-blocked result [N, C/16, s..., 16], whose row-major bytes are the
// plain [C] vector's; matmul's last dim, with one rhs free dim so that it is the GEMM's N).
// The first op that does not qualify ends the epilogue; it and the rest fuse into kernels as
// before. The ops of the epilogue belong to the library group (so they are in no kernel), its
// last op's value is the group's result, and an operand's buffer is materialised before the
// call (a computed per-channel operand, e.g. rsqrt(var + eps), becomes a small kernel of its
// own; an explicit broadcast of it is address arithmetic). Scalar affine steps in a row compose
// into one linear post-op. oneDNN 2.6's jit convolution applies one parameter set per eltwise
// algorithm of a chain (relu(leaky_relu(y, 0.1) + b) computed a leaky relu twice), so on a
// target that says so (EpilogueRule::one_parameter_set_per_eltwise) a relu or linear step whose
// parameters differ from an earlier one of its kind ends the epilogue
// (Epilogue.OneParameterSetPerEltwiseKind). In training, nn::relu's backward reads
// its output (Note [Relu masks] in src/ops/Elementwise.cpp), so a dense layer's bias and relu
// fold into its matmul in the training step too; batch norm's statistics read the conv result,
// so a conv followed by batch norm takes no epilogue in training. How the backend hands the chain
// to oneDNN (the leading affine steps as bias and weight scales, the rest as post-ops) is Note
// [Affine prefix] in src/backend/cpu/Dnnl.cpp.

// Note [Accumulating post-op]
// A matmul's result is often added to a value of its own shape: SGD momentum's v' = 0.9 v + dW
// right after the weight gradient's matmul, Adam's m' = 0.9 m + 0.1 dW, a residual add after a
// dense layer. oneDNN's sum post-op computes dst = chain(y) + k * dst, the old dst read while the
// new one is written, so y + d * k (k a one-value constant, d a value of y's shape in the
// result's row-major layout) joins the epilogue as sum(k) when the target allows it
// (EpilogueRule::sum; one per call) and saves the pass that reads y and d and writes the sum.
// The call's output buffer must hold d before the call; the cpu runner gives it, by preference:
//   - the variable's own buffer, when the result is the new value of the variable d and the
//     memory plan lets the call write it in place (Note [Memory plan]): d is already there;
//   - d's buffer, when the call is d's last reader and nothing else holds it (a residual);
//   - a copy of d.
// A call that cannot apply its epilogue (a long contraction summed in fixed pieces, Note [Long
// contractions]; nothing to contract) computes the plain product into a fresh buffer and the
// epilogue's reference kernels run on it, d read from its own buffer. A convolution takes it
// too (a residual block's shortcut in inference, where batch norm folds into the call); when
// oneDNN computes its result in a temporary of another layout, d is reordered into it first.

// Note [Compile scaling]
// fuse() must stay near-linear in graph size: unrolled recurrences, GELU chains and deep
// networks of 10^4..10^5 steps compile like short ones (bench/run compile_time). Three habits
// keep it so:
// - Walks through values that kernels recompute inline are memoised per group (compute_deps
//   visits an inline node once per group that reads it). The walk used to follow every path,
//   and an elementwise recurrence whose steps each read the carry twice has 2^steps paths:
//   130 steps took 23 s, 140 more than a minute.
// - Groups keep their member lists and their dependents, so a merge touches the two groups
//   and their neighbours, never the whole graph.
// - Each group has a depth (1 + its deepest dependency), kept valid through merges; a group
//   depends on another only if it is deeper, so a dependency walk skips everything not deeper
//   than its target, and two groups of one depth are independent without a walk. The walks
//   and candidate pairs spend one budget (kMergeWorkBase + kMergeWorkPerNode per node) that no
//   ordinary network spends; past it, "depends" answers yes (nothing merges) and siblings of
//   one depth still merge. A huge graph then gets fewer multi-output kernels, never a wrong one.
// - Sibling merging marks each candidate's relatives (the groups it depends on, and those that
//   depend on it) once, not one walk per candidate pair (Fuser::Relatives), and records a refusal
//   only where one kernel reads the other: a GELU chain of G kernels of one shape once spent G^3
//   steps and G^2/2 refusal strings there (a third of a 3x10^4-step chain's compile).
// - Each group looks at the next kSiblingCandidates groups of its space, not all of them: the
//   gradient of a 2x10^4-step chain with a normalisation every third step has 6x10^4 kernel
//   groups of one space, and the pairs alone (checks that fail on a relative or a cap) were 37% of
//   its compile; 3x10^4 steps took 43 s. No ordinary network has that many kernels of one
//   space (the paper's CNN step has 88 kernels in all), so their plans do not change.
// - A merged kernel has at most kMaxKernelOperands loads and outputs (Fuser::fits). The
//   instruction cap alone let 256 bias updates of a 1,000-layer MLP become one kernel of 768
//   operands; each load and store carries alias scopes naming all the others, and LLVM's
//   schedulers compare every pair of accesses through them: 18 of the first call's 19 s. Ordinary
//   networks lose little: the paper's CNN step has 88 kernels instead of 84 (its Adam updates
//   of one shape in kernels of six instead of one).

// Note [Bounded recomputation]
// A value recomputed inline in k kernels brings along what it reads inline, so the kernels that
// need a value are the union of those that need its readers. Along a chain, the sets grow: the
// gradient of `h = where(h > c, h - c, h * 0.5)` repeated reads every step's mask h_i > c in its
// own kernel of the backward, each mask recomputed the forward chain from x up to h_i, and step
// i was recomputed in up to n - i kernels. All of one shape, so kMaxRecompute (which counts a
// space once) never refused: n^2/2 recomputed steps, and 150 steps took 6.8 s (LLVM on 110
// kernels near the size cap), 1,000 more than a minute. kMaxRecomputeKernels bounds the
// kernels of any one value, cheap shifts too (Note [Recomputing a shift]), so recomputation at
// most multiplies the graph's elementwise work by a constant. Normalisations (4 kernels) and
// the merged siblings of Fusion.RecomputeUpToTheCapThenMaterialise (6) stay under it.

// Note [Kernel size]
// A fused kernel's ops are capped by cost, not by count (kMaxKernelInsts, Target::kernel_cost):
// LLVM's code generation is linear in a kernel's size only up to a point. An elementwise chain
// of `tanh(h * 0.9 + 0.1)` steps (AMD EPYC, AVX2) compiled at 5.0, 4.9, 6.2 and 8.6 ms per tanh
// in kernels of 21, 42, 85 and 170 steps (the register allocator's interference queries on a
// long block of live vectors dominate the profile); with every op counted as 1, the cap of
// 512 let 170 tanh steps into one kernel, 1.5 s each, and the first call of a 1,000-step chain
// took 7.3 s. The cpu target counts the functions it expands inline (exp, log, tanh: 10; erf,
// expm1, log1p: 20), which keeps such kernels near 50 transcendental ops, in the linear range;
// a chain of simple arithmetic still fuses 512 ops. Ordinary networks have no kernel near
// either cap, so their plans do not change.

// Note [Costs per context]
// A value a kernel reads through several movement ops is expanded once per index map (Note
// [Canonical chain steps]): a window of 72 slices of where(sin(x)..., tanh(erf(sin(x)))) put 72
// copies of erf, tanh and sin in one kernel, which kMaxKernelInsts, counting each op once, did
// not see. Its two kernels took 4.4 and 9.7 s in LLVM (FuzzFusion seed 2004441) and the work
// per point was 72 times the value's. So assign() counts the contexts each fused node is
// evaluated in: the largest count of its consumers that read it at their own index (elementwise
// ops, reductions) plus the counts of its movement consumers, each a context of its own (1 for a
// kernel's root or a materialised value); a node costs kernel_cost times that. A node with more
// than one context whose cost would take a kernel past the cap is materialised instead: its
// kernel computes it once per point, and the window reads it. A max pool's four strided slices
// of relu(batch norm) cost four times a few ops, far under the cap, and stay fused.

namespace {

enum class Kind : uint8_t { Leaf, Elementwise, Movement, Reduce, View, Dot, Window, Fallback };

/// The fusion class of a node on `target`: the op's class from its row (Ops.def), with the
/// library classes (dot, window) narrowed by what the target's libraries take (the reference
/// kernel runs the rest).
Kind classify(const Node& n, const Target& target) {
    using C = detail::FusionClass;
    switch (detail::fusion_class(n.op())) {
    case C::Leaf: return Kind::Leaf;
    case C::Elementwise: return Kind::Elementwise;
    case C::Movement: return Kind::Movement;
    case C::Reduce: return Kind::Reduce;
    case C::View: return Kind::View;
    case C::Dot:
    case C::Window:
        switch (target.library_call(n)) {
        case LibraryCall::Dot: return Kind::Dot;
        case LibraryCall::Window: return Kind::Window;
        case LibraryCall::None: return Kind::Fallback;
        }
        return Kind::Fallback;
    case C::Fallback: return Kind::Fallback;
    }
    return Kind::Fallback;
}

// Note [Values read for their shape alone]
// A broadcast's `like` input (ones_like, autodiff's gradient of a sum) and philox's shape input
// give a shape, not values, and bind() infers every node's type at call time whatever computes
// it (ExecPlan.cpp). So a node that no root needs through value edges gets no group: the plan
// used to compute it all the same, a matmul or a product of two activations for its shape alone
// (`ones_like(tanh(x @ W)) * 2 + z` ran the matmul). Canonicalize also points a shape-only
// input at the earliest value of its shape along elementwise ops (earliest_shape_source in
// Canonicalize.cpp), so that kernels of one shape share a shape source.

/// Input edges that carry values (broadcast's and philox's second input only give a shape).
bool value_edge(const Node& n, size_t i) { return !detail::shape_only_input(n, i); }

struct Fuser {
    const Target* target = nullptr;
    std::vector<const Node*> order;
    // dense tables over the graph's nodes (Note [Flat node tables] in src/core/NodeMap.h)
    detail::NodeMap<uint8_t> root_set;
    /// 1 for a node whose value a root needs; 0 for one read only for its shape (Note [Values
    /// read for their shape alone]), which no group computes.
    detail::NodeMap<uint8_t> needed;
    detail::NodeMap<std::vector<const Node*>> users;
    detail::NodeMap<Kind> kind;
    detail::NodeMap<uint8_t> dup; // 0 or 1 (not bool: NodeMap keeps its values in a vector)
    detail::NodeMap<int> group_of;
    /// Elementwise nodes recomputed inside several kernels: the kernels that need them.
    detail::NodeMap<std::set<int>> groupset;
    /// The index maps each assigned node is evaluated under (Note [Costs per context]).
    detail::NodeMap<int64_t> contexts;
    bool inline_node(const Node* n) { return duplicable(n) || groupset.count(n); }
    std::vector<Group> groups;
    /// Per group: the cost of its ops (Target::kernel_cost), capped by kMaxKernelInsts.
    std::vector<size_t> group_size;
    /// The nodes of each group (group_of[n] == g), so merging moves only the moved group's nodes.
    std::vector<std::vector<const Node*>> nodes_of;
    FusionPlan plan;
    /// Work left for the merging phases (Note [Compile scaling]).
    int64_t budget = 0;

    void join(const Node* n, int g) {
        group_of[n] = g;
        nodes_of[size_t(g)].push_back(n);
    }

    /// Note [Recomputing a shift]: an arithmetic op that reads at most one operand of its own
    /// size (the rest broadcast: per-channel vectors, scalars), e.g. d = x - mean(x). Each
    /// consumer kernel that recomputes it reads x where it would have read d, so recomputing it in
    /// any number of kernels saves d's write and moves no more bytes; kMaxRecompute does not
    /// apply. Normalisations read d in every kernel of their forward and backward.
    static bool cheap_shift(const Node* n) {
        static constexpr Op kShifts[] = {Op::Add, Op::Sub, Op::Mul, Op::Neg, Op::Max, Op::Min};
        if (std::find(std::begin(kShifts), std::end(kShifts), n->op()) == std::end(kShifts)) return false;
        int big = 0; // operands of the result's shape (the rest are broadcast to it)
        for (const auto& i : n->inputs()) big += i->shape() == n->shape();
        return big <= 1;
    }

    /// A movement op over a buffer: expanded inline into every consumer (address arithmetic).
    bool duplicable(const Node* n) {
        if (const uint8_t* known = dup.find(n))
            return *known != 0;
        bool d = false;
        bool fusible_users = true;
        for (const Node* u : users[n]) {
            Kind k = kind[u];
            fusible_users &= k == Kind::Elementwise || k == Kind::Movement || k == Kind::Reduce;
        }
        if (kind[n] == Kind::Movement && !root_set.count(n) && fusible_users) {
            const Node* in = n->input(0).get();
            Kind k = kind[in];
            d = k == Kind::Leaf || k == Kind::Reduce || k == Kind::View || k == Kind::Dot ||
                k == Kind::Window || k == Kind::Fallback || duplicable(in);
        }
        dup[n] = d ? 1 : 0;
        return d;
    }

    int new_group(Group::Kind k, const Node* root) {
        Group g;
        g.kind = k;
        g.roots.push_back(root->shared_from_this());
        groups.push_back(std::move(g));
        group_size.push_back(target->kernel_cost(root->op()));
        nodes_of.emplace_back();
        int id = static_cast<int>(groups.size()) - 1;
        join(root, id);
        return id;
    }

    // ---- epilogues (Note [Epilogue fusion]) ------------------------------------------------

    /// Whether the chain being matched may take an accumulating post-op (the call's rule, and
    /// none yet).
    bool sum_allowed = false;

    /// The target's epilogue rule for a library op's result (no channel dims: no epilogue).
    EpilogueRule epilogue_rule(const Node& n) {
        if (kind[&n] != Kind::Dot && kind[&n] != Kind::Window) return {};
        return target->epilogue(n);
    }

    /// An operand of an epilogue op, as a post-op takes it.
    struct Operand {
        const Node* buffer = nullptr; // a buffer of the values in channel order (or one value)
        bool constant = false;        // one value known now
        double value = 0;
        bool per_channel = false;
        std::vector<const Node*> broadcasts; // explicit broadcasts stripped (address arithmetic)
    };

    /// Reads `x`, an operand of an elementwise op over the shape `out`, as a post-op operand:
    /// one value, or a buffer broadcast along every dim of `out` but the channel dims `ch`.
    /// Empty string on success, else why not.
    std::string post_operand(const Node* x, const Shape& out, const std::vector<size_t>& ch,
                             Operand& o) {
        size_t r = out.size();
        if (x->shape().size() > r) return "operand of higher rank";
        std::vector<size_t> map; // operand dim -> result dim (implicit broadcasts right-align)
        for (size_t i = 0; i < x->shape().size(); ++i) map.push_back(r - x->shape().size() + i);
        while (x->is(Op::Broadcast)) {
            if (root_set.count(x)) return "operand " + x->describe(1) + " is a function output";
            for (const Node* u : users[x]) {
                Kind k = kind[u];
                if (!(k == Kind::Elementwise || k == Kind::Movement || k == Kind::Reduce))
                    return "operand " + x->describe(1) + " is also read by " + op_name(u->op());
            }
            const auto& a = x->attr<BroadcastAttrs>();
            std::vector<size_t> m;
            for (int64_t d : a.dims) m.push_back(map[size_t(d)]);
            o.broadcasts.push_back(x);
            x = x->input(0).get();
            map = std::move(m);
        }
        if (x->dtype() != DType::F32) return "operand is not f32";
        const Shape& s = x->shape();
        Shape eff(r, 1); // the operand's dims as result dims
        for (size_t i = 0; i < s.size(); ++i) {
            if (s[i] < 0) return "operand " + x->describe(1) + " has a dynamic dim";
            eff[map[i]] = s[i];
        }
        bool one = numel(s) == 1;
        for (size_t d = 0; d < r && !one; ++d) {
            bool channel = std::find(ch.begin(), ch.end(), d) != ch.end();
            if (channel ? eff[d] != out[d] : eff[d] != 1)
                return "operand " + x->describe(1) + " " + shape_str(s) + " is not per-channel";
        }
        if (one && x->is(Op::Constant)) {
            o.constant = true;
            o.value = x->attr<ConstantAttrs>().value.at(0);
        }
        // a movement op over a buffer is inline address arithmetic: no buffer of its own
        if (kind[x] == Kind::Movement) return "operand " + x->describe(1) + " is a movement op";
        o.buffer = x;
        o.per_channel = !one;
        return "";
    }

    /// The post-op computing cur's one consumer (or a relu select's two or three): the ops
    /// it covers in `members`, the broadcasts it strips in `bcasts`. Empty string on success.
    std::string match_post_op(const Node* cur, const std::vector<size_t>& ch, PostOp& p,
                              std::vector<const Node*>& members, std::vector<const Node*>& bcasts) {
        if (root_set.count(cur)) return cur->describe(1) + " is a function output";
        const auto& us = users[cur];
        if (us.size() == 2 || us.size() == 3)
            return match_relu_select(cur, p, members, bcasts);
        if (us.size() != 1) return "read by " + std::to_string(us.size()) + " ops";
        const Node* u = us[0];
        // a + b of two matmuls: the first one's epilogue took the add as its sum
        if (group_of.count(u))
            return std::string("consumer ") + op_name(u->op()) + " is in another epilogue";
        Op op = u->op();
        bool binary =
            op == Op::Add || op == Op::Sub || op == Op::Mul || op == Op::Max || op == Op::Min;
        if (kind[u] != Kind::Elementwise || !binary)
            return std::string("consumer ") + op_name(op) + " has no post-op";
        if (u->dtype() != DType::F32 || u->shape() != cur->shape())
            return std::string("consumer ") + op_name(op) + " changes the type";
        if (u->input(0).get() == cur && u->input(1).get() == cur)
            return std::string("consumer ") + op_name(op) + " reads the value twice";
        size_t ci = u->input(0).get() == cur ? 0 : 1;
        Operand o;
        std::string why = post_operand(u->input(1 - ci).get(), cur->shape(), ch, o);
        if (!why.empty() && !o.constant && op == Op::Add && sum_allowed)
            if (match_sum(cur, u, ci, p, members, bcasts))
                return "";
        if (!why.empty() && !o.constant) return why;
        p.node = u->shared_from_this();
        p.op = op;
        if (o.constant && op != Op::Max && op != Op::Min) {
            double c = o.value;
            p.kind = PostOp::Kind::Linear;
            if (op == Op::Add) p.alpha = 1, p.beta = c;
            if (op == Op::Sub) p.alpha = ci == 0 ? 1 : -1, p.beta = ci == 0 ? -c : c;
            if (op == Op::Mul) p.alpha = c, p.beta = 0;
        } else if (o.constant && op == Op::Max && o.value == 0) {
            p.kind = PostOp::Kind::Relu;
            p.alpha = 0;
        } else {
            if (!why.empty()) return why;
            if (op == Op::Sub && ci == 1) return "the value is subtracted from its operand";
            p.kind = PostOp::Kind::Binary;
            p.operand = o.buffer->shared_from_this();
            p.per_channel = o.per_channel;
        }
        members = {u};
        bcasts = o.broadcasts;
        return "";
    }

    /// y + d or y + d * k (Note [Accumulating post-op]): d a value of y's shape, read in the
    /// result's own layout, k a one-value constant -> sum with scale k.
    bool match_sum(const Node* cur, const Node* add, size_t ci, PostOp& p,
                   std::vector<const Node*>& members, std::vector<const Node*>& bcasts) {
        const Node* d = add->input(1 - ci).get();
        const Node* mul = nullptr;
        double k = 1;
        if (d->is(Op::Mul) && !root_set.count(d) && users[d].size() == 1)
            for (size_t i = 0; i < 2 && !mul; ++i)
                if (splat_value(*d->input(1 - i), &k) && d->input(i)->shape() == d->shape()) {
                    mul = d;
                    d = d->input(i).get();
                }
        if (!mul)
            k = 1;
        if (d == cur || d->dtype() != DType::F32 || d->shape() != cur->shape() || !std::isfinite(k))
            return false;
        // a movement op or a broadcast is address arithmetic over another buffer, not the
        // result's layout
        if (kind[d] == Kind::Movement || d->is(Op::Broadcast))
            return false;
        p.kind = PostOp::Kind::Sum;
        p.op = Op::Add;
        p.alpha = k;
        p.operand = d->shared_from_this();
        p.node = add->shared_from_this();
        members = mul ? std::vector<const Node*>{mul, add} : std::vector<const Node*>{add};
        bcasts.clear();
        if (mul) // the constant's broadcasts are address arithmetic
            for (const Node* c = mul->input(mul->input(0).get() == d ? 1 : 0).get();
                 c->is(Op::Broadcast); c = c->input(0).get())
                bcasts.push_back(c);
        return true;
    }

    /// A relu as a select on x's sign -> relu with negative slope s: where(x <= 0, 0, x)
    /// (nn::relu, s = 0), where(x <= 0, x * s, x) (nn::leaky_relu) and where(x >= 0, x, x * s)
    /// (the compare may be strict). cur is x; it has 2 readers (compare, where) or 3 (and mul).
    std::string match_relu_select(const Node* cur, PostOp& p, std::vector<const Node*>& members,
                                  std::vector<const Node*>& bcasts) {
        const Node *w = nullptr, *cmp = nullptr, *mul = nullptr;
        for (const Node* u : users[cur]) {
            if (u->is(Op::Where)) w = u;
            if (u->is(Op::Ge) || u->is(Op::Gt) || u->is(Op::Le) || u->is(Op::Lt))
                cmp = u;
            if (u->is(Op::Mul)) mul = u;
        }
        const std::string no =
            "read by " + std::to_string(users[cur].size()) + " ops (not a relu select)";
        // every reader is one of the select's ops: a third one (a channel unblock of x that
        // the function returns, say) needs x itself, which the post-ops never write
        if (!w || !cmp || root_set.count(cmp) || (mul && root_set.count(mul)) ||
            users[cur].size() != (mul ? 3u : 2u))
            return no;
        if (users[cmp].size() != 1 || (mul && users[mul].size() != 1))
            return no;
        if (w->dtype() != DType::F32 || w->shape() != cur->shape()) return no;
        // the branch taken where x is positive, and the other one
        bool below_first = cmp->is(Op::Le) || cmp->is(Op::Lt);
        const Node* pos = w->input(below_first ? 2 : 1).get();
        const Node* neg = w->input(below_first ? 1 : 2).get();
        // the constants: one value, possibly broadcast (address arithmetic) or folded full-size
        double zero, slope;
        auto splat = [&](const Node* x, double& v) {
            if (!splat_value(*x, &v))
                return false;
            for (; x->is(Op::Broadcast); x = x->input(0).get())
                bcasts.push_back(x);
            return true;
        };
        bcasts.clear();
        if (w->input(0).get() != cmp || cmp->input(0).get() != cur || pos != cur ||
            !splat(cmp->input(1).get(), zero) || zero != 0)
            return no;
        if (mul) {
            size_t ci = mul->input(0).get() == cur ? 0 : 1;
            if (neg != mul || mul->input(ci).get() != cur ||
                !splat(mul->input(1 - ci).get(), slope))
                return no;
            members = {cmp, mul, w};
        } else {
            if (!splat(neg, slope) || slope != 0)
                return no;
            slope = 0; // not -0
            members = {cmp, w};
        }
        p.kind = PostOp::Kind::Relu;
        p.op = Op::Where;
        p.alpha = slope;
        p.node = w->shared_from_this();
        return "";
    }

    /// Gives each f32 conv and matmul the epilogue its chain of consumers allows: the library
    /// groups are made here, with the epilogue's ops as members.
    void find_epilogues() {
        for (const Node* n : order) {
            if (!needed[n])
                continue;
            EpilogueRule rule = epilogue_rule(*n);
            const std::vector<size_t>& ch = rule.channel_dims;
            if (ch.empty()) continue;
            sum_allowed = rule.sum;
            std::vector<PostOp> epi;
            std::vector<const Node*> epi_nodes, bcasts;
            const Node* cur = n;
            std::string stop;
            while (true) {
                PostOp p;
                std::vector<const Node*> ms, bs;
                stop = match_post_op(cur, ch, p, ms, bs);
                if (!stop.empty()) break;
                if (p.kind == PostOp::Kind::Sum)
                    sum_allowed = false; // one per call
                bool eltwise = p.kind == PostOp::Kind::Relu || p.kind == PostOp::Kind::Linear;
                if (eltwise && !epi.empty() && epi.back().kind == PostOp::Kind::Linear &&
                    p.kind == PostOp::Kind::Linear) {
                    // a2 (a1 x + b1) + b2: one linear post-op
                    PostOp& q = epi.back();
                    q.beta = p.alpha * q.beta + p.beta;
                    q.alpha = p.alpha * q.alpha;
                    q.node = p.node;
                } else {
                    // a target may apply one parameter set per eltwise algorithm of a chain
                    // (Note [Epilogue fusion])
                    bool clash = false;
                    for (const auto& q : epi)
                        clash = clash || (eltwise && rule.one_parameter_set_per_eltwise && q.kind == p.kind &&
                                          (q.alpha != p.alpha || q.beta != p.beta));
                    if (clash) {
                        stop = "a second " + p.str() + " post-op with other parameters";
                        break;
                    }
                    epi.push_back(p);
                }
                epi_nodes.insert(epi_nodes.end(), ms.begin(), ms.end());
                bcasts.insert(bcasts.end(), bs.begin(), bs.end());
                cur = p.node.get();
            }
            std::string what = n->describe(1);
            if (epi.empty()) {
                plan.decisions.push_back("no epilogue for " + what + ": " + stop);
                continue;
            }
            std::string ops;
            for (const auto& p : epi) ops += " " + p.str();
            plan.decisions.push_back("epilogue of " + what + ":" + ops + "; stops: " + stop);
            int id = new_group(n->is(Op::Conv) ? Group::Kind::Window : Group::Kind::Dot, n);
            groups[size_t(id)].epilogue = std::move(epi);
            for (const Node* m : epi_nodes) join(m, id);
            for (const Node* b : bcasts)
                dup[b] = 1;
        }
    }

    void assign() {
        for (auto it = order.rbegin(); it != order.rend(); ++it) {
            const Node* n = *it;
            Kind k = kind[n];
            if (group_of.count(n)) continue; // a library op with its epilogue, or a member
            if (k == Kind::Leaf || !needed[n] || duplicable(n))
                continue;
            if (k == Kind::View) { new_group(Group::Kind::View, n); continue; }
            if (k == Kind::Dot) { new_group(Group::Kind::Dot, n); continue; }
            if (k == Kind::Window) { new_group(Group::Kind::Window, n); continue; }
            if (k == Kind::Fallback) { new_group(Group::Kind::Fallback, n); continue; }
            if (k == Kind::Reduce || root_set.count(n)) {
                new_group(Group::Kind::Kernel, n);
                continue;
            }
            // an elementwise or movement node: join the one kernel group all its consumers are
            // in; recompute it inside each of a few consumer kernels (cheaper than a round trip
            // through memory); or materialise it
            std::set<int> gs;
            bool ok = !users[n].empty();
            std::string why;
            for (const Node* u : users[n]) {
                Kind uk = kind[u];
                if (!(uk == Kind::Elementwise || uk == Kind::Movement || uk == Kind::Reduce)) {
                    ok = false;
                    why = std::string("consumer ") + op_name(u->op()) + " is not fusible";
                    break;
                }
                if (const std::set<int>* d = groupset.find(u)) {
                    gs.insert(d->begin(), d->end());
                    continue;
                }
                const int* g = group_of.find(u);
                if (!g || groups[*g].kind != Group::Kind::Kernel) {
                    ok = false;
                    why = std::string("consumer ") + op_name(u->op()) + " is not in a kernel";
                    if (g && !groups[*g].epilogue.empty())
                        why = "operand of a post-op of " + groups[*g].roots[0]->describe(1);
                    break;
                }
                gs.insert(*g);
            }
            // consumer kernels over one space with the same reduced axes are counted once:
            // sibling merging usually makes them one kernel (batch norm's backward sums)
            std::set<std::pair<Shape, std::vector<int64_t>>> merge_keys;
            for (int g : gs) {
                const Node* r = groups[size_t(g)].roots[0].get();
                if (kind[r] == Kind::Reduce)
                    merge_keys.emplace(canonical_space(r->input(0).get()), r->attr<ReduceAttrs>().axes);
                else
                    merge_keys.emplace(canonical_space(r), std::vector<int64_t>{});
            }
            if (ok && merge_keys.size() > kMaxRecompute && !cheap_shift(n)) {
                ok = false;
                why = "used by " + std::to_string(gs.size()) + " kernels";
            }
            if (ok && gs.size() > kMaxRecomputeKernels) { // Note [Bounded recomputation]
                ok = false;
                why = "recomputed in " + std::to_string(gs.size()) + " kernels";
            }
            // Note [Costs per context]
            int64_t same = 0, moved = 0;
            for (const Node* u : users[n]) {
                const int64_t* c = contexts.find(u);
                const int64_t cu = c ? *c : 1;
                if (kind[u] == Kind::Movement)
                    moved += cu;
                else
                    same = std::max(same, cu);
            }
            const int64_t ctx = std::clamp<int64_t>(same + moved, 1, int64_t(1) << 20);
            const size_t cost = target->kernel_cost(n->op()) * size_t(ctx);
            for (int g : gs)
                if (ok && group_size[g] >= kMaxKernelInsts) {
                    ok = false;
                    why = "kernel size cap reached";
                } else if (ok && ctx > 1 && group_size[g] + cost > kMaxKernelInsts) {
                    ok = false;
                    why = "read under " + std::to_string(ctx) +
                          " index maps, past the kernel size cap";
                }
            contexts[n] = ok ? ctx : 1;
            if (ok && gs.size() == 1) {
                join(n, *gs.begin());
                group_size[*gs.begin()] += cost;
            } else if (ok) {
                groupset[n] = gs;
                for (int g : gs)
                    group_size[g] += cost;
                plan.decisions.push_back("recompute " + n->describe(1) + " in " + std::to_string(gs.size()) +
                                         " kernels");
            } else {
                if (!users[n].empty())
                    plan.decisions.push_back("materialise " + n->describe(1) + ": " + why);
                new_group(Group::Kind::Kernel, n);
            }
        }
    }

    /// Iteration space and reduced axes of a kernel group (from its first root).
    void set_space(Group& g) {
        const Node* r = g.roots[0].get();
        if (kind[r] == Kind::Reduce) {
            g.space = r->input(0);
            g.reduce_axes = r->attr<ReduceAttrs>().axes;
        } else {
            g.space = g.roots[0];
        }
    }

    /// g's dependencies (groups whose values g reads) and dependents, as group indices; depth[g]
    /// is 1 + the largest depth of its dependencies, so g depends on h only if depth[g] >
    /// depth[h] (kept so through merges: Note [Compile scaling]).
    std::vector<std::set<int>> deps, rdeps;
    std::vector<int64_t> depth;
    /// Per group: the values it reads from outside (other groups' results, leaves; not scalar
    /// constants), sorted by address (only their number is used). A kernel loads each of them
    /// and stores its roots: its operands, capped by kMaxKernelOperands.
    std::vector<std::vector<const Node*>> reads;
    /// May groups a and b become one kernel? Both caps hold for the merged kernel. (A producer
    /// merge counts the values b read from a as loads still: a bound, not the exact count.)
    bool fits(size_t a, size_t b) const {
        if (group_size[a] + group_size[b] > kMaxKernelInsts)
            return false;
        const size_t outs = groups[a].roots.size() + groups[b].roots.size();
        const size_t ra = reads[a].size(), rb = reads[b].size();
        // values both read are loaded once
        return outs + ra + rb <= kMaxKernelOperands ||
               outs + ra + rb - shared_reads(a, b) <= kMaxKernelOperands;
    }
    /// The values groups a and b both read (their sorted `reads` merged).
    size_t shared_reads(size_t a, size_t b) const {
        const auto &ra = reads[a], &rb = reads[b];
        size_t both = 0;
        for (size_t i = 0, j = 0; i < ra.size() && j < rb.size();) {
            if (ra[i] == rb[j])
                ++both, ++i, ++j;
            else if (std::less<const Node*>()(ra[i], rb[j]))
                ++i;
            else
                ++j;
        }
        return both;
    }
    /// A one-value constant: the same at every point, an immediate in a kernel, never a load.
    static bool scalar_constant(const Node* n) {
        return n->is(Op::Constant) && n->attr<ConstantAttrs>().value.size() == 1;
    }
    void add_dep(int g, int h) {
        deps[size_t(g)].insert(h);
        rdeps[size_t(h)].insert(g);
    }
    void compute_deps() {
        deps.assign(groups.size(), {});
        rdeps.assign(groups.size(), {});
        reads.assign(groups.size(), {});
        // a node recomputed inline is walked once per group that reads it, not once per path
        detail::NodeMap<int> walked_by, read_by;
        std::vector<const Node*> stack;
        for (size_t g = 0; g < groups.size(); ++g) {
            stack.assign(nodes_of[g].begin(), nodes_of[g].end());
            while (!stack.empty()) {
                const Node* m = stack.back();
                stack.pop_back();
                for (size_t i = 0; i < m->num_inputs(); ++i) {
                    if (!value_edge(*m, i)) continue;
                    const Node* x = m->input(i).get();
                    const int* h = group_of.find(x);
                    if (h ? *h != int(g) : !inline_node(x) && !scalar_constant(x)) {
                        auto [r, fresh] = read_by.insert(x, int(g));
                        if (fresh || *r != int(g))
                            reads[g].push_back(x);
                        *r = int(g);
                    }
                    if (h) {
                        if (*h != int(g))
                            add_dep(int(g), *h);
                    } else if (inline_node(x)) {
                        auto [w, fresh] = walked_by.insert(x, int(g));
                        if (!fresh && *w == int(g))
                            continue;
                        *w = int(g);
                        stack.push_back(x);
                    }
                }
            }
            std::sort(reads[g].begin(), reads[g].end(), std::less<const Node*>());
        }
        // depths in dependency order (Kahn)
        depth.assign(groups.size(), 0);
        std::vector<size_t> waiting(groups.size());
        std::vector<int> ready;
        for (size_t g = 0; g < groups.size(); ++g)
            if ((waiting[g] = deps[g].size()) == 0) ready.push_back(int(g));
        while (!ready.empty()) {
            int h = ready.back();
            ready.pop_back();
            for (int g : rdeps[size_t(h)]) {
                depth[size_t(g)] = std::max(depth[size_t(g)], depth[size_t(h)] + 1);
                if (--waiting[size_t(g)] == 0) ready.push_back(g);
            }
        }
    }

    /// After a merge into g: dependents of g get deeper than g, and theirs than them.
    void raise_dependents(int g) {
        std::vector<int> work{g};
        while (!work.empty()) {
            int x = work.back();
            work.pop_back();
            for (int r : rdeps[size_t(x)])
                if (depth[size_t(r)] <= depth[size_t(x)]) {
                    depth[size_t(r)] = depth[size_t(x)] + 1;
                    work.push_back(r);
                }
        }
    }

    /// Moves group a's nodes and edges into group b (a is then empty).
    void absorb(int b, int a) {
        for (const Node* n : nodes_of[size_t(a)]) join(n, b);
        nodes_of[size_t(a)].clear();
        group_size[size_t(b)] += group_size[size_t(a)];
        std::vector<const Node*> u;
        std::set_union(reads[size_t(b)].begin(), reads[size_t(b)].end(), reads[size_t(a)].begin(),
                       reads[size_t(a)].end(), std::back_inserter(u), std::less<const Node*>());
        reads[size_t(b)] = std::move(u);
        reads[size_t(a)].clear();
        for (int r : rdeps[size_t(a)]) {
            deps[size_t(r)].erase(a);
            if (r != b) add_dep(r, b);
        }
        for (int d : deps[size_t(a)]) {
            rdeps[size_t(d)].erase(a);
            if (d != b) add_dep(b, d);
        }
        deps[size_t(a)].clear();
        rdeps[size_t(a)].clear();
        depth[size_t(b)] = std::max(depth[size_t(b)], depth[size_t(a)]);
        raise_dependents(b);
    }

    /// Does group a (transitively) depend on group b? A path from a down to b passes only
    /// through groups deeper than b, so the walk skips the rest. Each step spends the merging
    /// budget; once it is spent the answer is "yes", the one that merges nothing.
    bool depends(int a, int b) {
        if (a == b) return true;
        if (depth[size_t(a)] <= depth[size_t(b)]) return false;
        // the groups this walk has seen carry its epoch (no set per walk: Note [Flat node tables])
        if (seen_in.size() < groups.size())
            seen_in.resize(groups.size(), 0);
        if (++walk == 0) {
            std::fill(seen_in.begin(), seen_in.end(), 0);
            walk = 1;
        }
        std::vector<int>& stack = walk_stack;
        stack.assign(1, a);
        seen_in[size_t(a)] = walk;
        while (!stack.empty()) {
            int x = stack.back();
            stack.pop_back();
            // a step and each edge it follows spend the budget: a group may read thousands
            budget -= 1 + int64_t(deps[size_t(x)].size());
            if (budget < 0)
                return true;
            for (int d : deps[size_t(x)]) {
                if (d == b) return true;
                if (depth[size_t(d)] > depth[size_t(b)] && seen_in[size_t(d)] != walk) {
                    seen_in[size_t(d)] = walk;
                    stack.push_back(d);
                }
            }
        }
        return false;
    }
    std::vector<uint32_t> seen_in; // per group: the last depends() walk that reached it
    uint32_t walk = 0;
    std::vector<int> walk_stack;

    /// Sibling merging asks whether one group a depends on, or is depended on by, each of the
    /// later groups of its iteration space. One depends() walk per pair revisits the groups
    /// between them for every candidate: a chain of G groups of one shape cost G^3 steps until
    /// the budget ran out. Instead a's relatives are marked once, with a's epoch: `up` the
    /// groups a depends on (over deps), `down` those that depend on a (over rdeps), each found
    /// on its first use and grown by b's when a absorbs b. The marks spend the merging budget;
    /// once it is spent they are incomplete, and every pair of different depths counts as
    /// related (Note [Compile scaling]).
    struct Relatives {
        int of = -1;
        uint32_t epoch = 0;
        std::vector<uint32_t> up, down;
        bool up_known = false, down_known = false, exact = true;
        void reset(int a, size_t n) {
            of = a;
            up_known = down_known = false;
            exact = true;
            if (up.size() < n) {
                up.resize(n, 0);
                down.resize(n, 0);
            }
            if (++epoch == 0) {
                std::fill(up.begin(), up.end(), 0);
                std::fill(down.begin(), down.end(), 0);
                epoch = 1;
            }
        }
    } rel;
    /// Marks, with rel's epoch, every group reachable from `from` over `edges` and not marked yet.
    void mark_from(int from, const std::vector<std::set<int>>& edges, std::vector<uint32_t>& mark) {
        std::vector<int>& stack = walk_stack;
        stack.assign(1, from);
        while (!stack.empty()) {
            int x = stack.back();
            stack.pop_back();
            budget -= 1 + int64_t(edges[size_t(x)].size()); // as in depends()
            if (budget < 0) {
                rel.exact = false;
                return;
            }
            for (int d : edges[size_t(x)])
                if (mark[size_t(d)] != rel.epoch) {
                    mark[size_t(d)] = rel.epoch;
                    stack.push_back(d);
                }
        }
    }
    /// Does group rel.of depend on b, or b on it? Groups of one depth never do.
    bool related(int b) {
        const int a = rel.of;
        if (depth[size_t(a)] == depth[size_t(b)])
            return false;
        const bool up = depth[size_t(a)] > depth[size_t(b)];
        bool& known = up ? rel.up_known : rel.down_known;
        std::vector<uint32_t>& mark = up ? rel.up : rel.down;
        if (!known) {
            mark_from(a, up ? deps : rdeps, mark);
            known = true;
        }
        return !rel.exact || mark[size_t(b)] == rel.epoch;
    }

    /// Does kernel group b read the roots of group a only at its own iteration point (an
    /// elementwise or reducing node of b, or a value b recomputes, takes a root of a whole,
    /// with the same shape: no movement, no broadcast)?
    bool reads_pointwise(int b, int a) {
        bool ok = true, any = false;
        std::unordered_set<const Node*> seen;
        std::function<void(const Node*)> visit = [&](const Node* m) {
            if (!ok || !seen.insert(m).second) return;
            for (size_t i = 0; i < m->num_inputs() && ok; ++i) {
                if (!value_edge(*m, i)) continue;
                const Node* x = m->input(i).get();
                const int* h = group_of.find(x);
                if (h && *h == a) {
                    any = true;
                    Kind k = kind[m];
                    if (k == Kind::Reduce) // reducing the root over b's whole space
                        ok = x == groups[b].space.get();
                    else
                        ok = k == Kind::Elementwise && x->shape() == m->shape() &&
                             same_space(m, groups[b].space.get());
                } else if (!h && inline_node(x)) {
                    visit(x);
                }
            }
        };
        // a's outputs are stored over b's loops: the spaces must be the same, dynamic dims
        // included (Note [Equal dynamic dims]: two dims of -1 may differ at the call)
        if (!same_space(groups[a].space.get(), groups[b].space.get()))
            return false;
        budget -= int64_t(nodes_of[size_t(b)].size());
        for (const Node* n : nodes_of[size_t(b)]) visit(n);
        return ok && any;
    }

    /// Producer-consumer multi-output kernels: an elementwise kernel whose roots one consumer
    /// kernel reads only pointwise over the same iteration space becomes extra outputs of the
    /// consumer, which uses the values in registers:
    ///   v = 0.9*v + g  (kernel A: stores v)            one kernel: reads v, g, W;
    ///   W = W - 0.01*v (kernel B: loads v, stores W)   stores v and W
    /// Other readers of the roots must not be needed before the consumer runs.
    void merge_producers(std::vector<int>& alias) {
        for (size_t b = 0; b < groups.size() && budget > 0; ++b) {
            if (groups[b].kind != Group::Kind::Kernel || alias[b] != int(b)) continue;
            bool again = true;
            while (again && budget > 0) {
                again = false;
                for (int a : std::vector<int>(deps[b].begin(), deps[b].end())) {
                    Group& ga = groups[a];
                    if (ga.kind != Group::Kind::Kernel || alias[a] != a || !ga.reduce_axes.empty()) continue;
                    if (!fits(size_t(a), b))
                        continue;
                    if (!reads_pointwise(int(b), a)) continue;
                    // a reduction loops over its kept dims first: over leading reduced dims the
                    // producer's stores would go down columns (slower than its own pass)
                    const auto& ra = groups[b].reduce_axes;
                    int64_t rank = int64_t(groups[b].space->shape().size());
                    bool trailing = true;
                    for (size_t i = 0; i < ra.size(); ++i) trailing = trailing && ra[i] == rank - int64_t(ra.size() - i);
                    if (!trailing) continue;
                    // another path from b down to a, or from a up to b, would become a cycle
                    bool cycle = false;
                    for (int d : deps[b]) cycle = cycle || (d != a && depends(d, a));
                    for (int c : rdeps[size_t(a)])
                        if (!cycle && c != int(b)) cycle = depends(int(b), c);
                    if (cycle) continue;
                    plan.decisions.push_back("merged producer " + ga.roots[0]->describe(1) + " into " +
                                             groups[b].roots[0]->describe(1));
                    std::vector<NodePtr> roots = ga.roots;
                    for (auto& r : groups[b].roots) roots.push_back(r);
                    groups[b].roots = std::move(roots);
                    ga.roots.clear();
                    absorb(int(b), a);
                    alias[a] = int(b);
                    again = true;
                    break;
                }
            }
        }
    }

    // Note [Equal dynamic dims]
    // Sibling kernels merge when their iteration spaces are equal. A dim of -1 (a batch bound at
    // call time) equals another -1 only where the graph forces it: an elementwise op's operand
    // dim of -1 never broadcasts (check_runtime_broadcast), so it is the result's dim; a
    // reduction keeps its kept dims; a broadcast or reshape with a `like` input takes like's
    // dims; a permutation moves dims; a reshape that keeps dim 0 and whose other dims are static
    // with equal products keeps dim 0 (the layout pass's blocked views); a conv, a pool and
    // their data gradients keep the batch. These dims are put in classes (union-find over
    // (node, dim)); two spaces are equal when their static dims are and their dynamic dims are
    // in one class. Without this, no two kernels over a dynamic batch merged, and a batch
    // norm's backward sums ran one pass each. plan_kernel checks the equality again at call
    // time for every kernel with several outputs.
    detail::NodeMap<int> dim_base; // id of (n, 0); (n, d) is base + d
    std::vector<int> dim_parent;
    int dim_id(const Node* n, int d) {
        auto [base, fresh] = dim_base.insert(n, int(dim_parent.size()));
        if (fresh)
            for (int i = 0; i < n->rank(); ++i) dim_parent.push_back(int(dim_parent.size()));
        return *base + d;
    }
    int dim_find(int a) {
        while (dim_parent[size_t(a)] != a) a = dim_parent[size_t(a)] = dim_parent[size_t(dim_parent[size_t(a)])];
        return a;
    }
    void dim_unite(const Node* a, int da, const Node* b, int db) {
        if (a->shape()[size_t(da)] != -1 || b->shape()[size_t(db)] != -1) return;
        int x = dim_find(dim_id(a, da)), y = dim_find(dim_id(b, db));
        if (x != y) dim_parent[size_t(std::max(x, y))] = std::min(x, y);
    }
    void classify_dims() {
        for (const Node* n : order) {
            const int r = n->rank();
            const Op op = n->op();
            if (has_trait(op, kElementwise)) {
                for (size_t i = 0; i < n->num_inputs(); ++i) {
                    const Node* in = n->input(i).get();
                    const int lead = r - in->rank();
                    for (int d = std::max(lead, 0); d < r; ++d) dim_unite(n, d, in, d - lead);
                }
            } else if (kind[n] == Kind::Reduce && n->num_inputs() == 1) {
                const Node* in = n->input(0).get();
                const auto& ra = n->attr<ReduceAttrs>();
                int j = 0;
                for (int d = 0; d < in->rank(); ++d) {
                    bool reduced = std::find(ra.axes.begin(), ra.axes.end(), d) != ra.axes.end();
                    if (!reduced || ra.keepdims) {
                        if (!reduced && j < r) dim_unite(n, j, in, d);
                        ++j;
                    }
                }
            } else if ((op == Op::Broadcast || op == Op::Reshape) && n->num_inputs() == 2) {
                const Node* like = n->input(1).get();
                if (like->rank() == r)
                    for (int d = 0; d < r; ++d) dim_unite(n, d, like, d);
            } else if (op == Op::Broadcast) {
                const auto& b = n->attr<BroadcastAttrs>();
                for (size_t i = 0; i < b.dims.size(); ++i) dim_unite(n, int(b.dims[i]), n->input(0).get(), int(i));
            } else if (op == Op::Permute) {
                const auto& p = n->attr<AxesAttrs>().axes;
                for (size_t d = 0; d < p.size(); ++d) dim_unite(n, int(d), n->input(0).get(), int(p[d]));
            } else if (op == Op::Reshape && r >= 1 && n->input(0)->rank() >= 1) {
                const Shape& a = n->shape();
                const Shape& b = n->input(0)->shape();
                int64_t pa = 1, pb = 1;
                bool ok = true;
                for (size_t d = 1; d < a.size(); ++d) { ok &= a[d] >= 0; pa *= a[d]; }
                for (size_t d = 1; d < b.size(); ++d) { ok &= b[d] >= 0; pb *= b[d]; }
                if (ok && pa == pb && pa > 0) dim_unite(n, 0, n->input(0).get(), 0);
            } else if ((op == Op::Conv || op == Op::Pool || op == Op::ConvBackwardData ||
                        op == Op::MaxPoolBackward || op == Op::AvgPoolBackward) && r >= 1 &&
                       n->input(0)->rank() >= 1) {
                dim_unite(n, 0, n->input(0).get(), 0);
            }
        }
    }
    /// A space's shape with each dynamic dim replaced by -2 - its class.
    Shape canonical_space(const Node* space) {
        Shape s = space->shape();
        for (size_t d = 0; d < s.size(); ++d)
            if (s[d] < 0) s[d] = -2 - dim_find(dim_id(space, int(d)));
        return s;
    }
    /// Whether x and y have the same shape at every call: equal static dims, and dynamic dims
    /// that the graph forces equal (Note [Equal dynamic dims]).
    bool same_space(const Node* x, const Node* y) {
        return x->shape() == y->shape() && canonical_space(x) == canonical_space(y);
    }

    // Note [A reduction joins a kernel it shares a read with]
    // Sibling merging makes one kernel of two over the same iteration space. When both reduce,
    // or neither does, the merged kernel is of the kind each was. When only one reduces, the
    // other's points are stored from inside a reduction's loops (in the row order of Note [Row
    // reductions] in KernelPlan.cpp for a per-channel sum, cut into the fixed chunks of Note
    // [Thread-count-independent sums]), which is slower for the elementwise part than a kernel
    // of its own. That pays when the two read a value in common (one pass over it instead of
    // two), not otherwise: the merge then saves only a kernel's start. So a reducing group and
    // a non-reducing one merge only when they read a value in common. What showed it: with a
    // batch bound at call time, batch norm's element counts (sums of ones_like(x), which read
    // nothing) were merged into batch-norm backward dx kernels of their space, making them
    // reductions. In the SymJAX paper network's step (AMD EPYC, Zen 5, 2 threads, `symjax_bench
    // cnn_train --arch symjax --profile 1`) a 16x16 layer's dx kernel took 0.057-0.059 ms with
    // three counts and 0.047 ms without (its two twins 0.046-0.048), layer 0's 0.181-0.182 and
    // 0.168-0.175. The counts now join a reduction of their space, where a sum of a constant
    // costs nothing (Note [Sums that need no accumulator] in LlvmRenderer.cpp).

    /// Merges kernel groups over the same iteration space (multi-output kernels); dynamic dims
    /// must be equal by Note [Equal dynamic dims].
    void merge_siblings() {
        for (auto& g : groups)
            if (g.kind == Group::Kind::Kernel) set_space(g);
        compute_deps();
        std::vector<int> alias(groups.size());
        for (size_t i = 0; i < alias.size(); ++i) alias[i] = int(i);
        merge_producers(alias);
        // candidates share the iteration space: one list per static shape, in group order
        std::map<Shape, std::vector<int>> by_space;
        std::vector<size_t> place(groups.size());
        std::vector<const std::vector<int>*> space_of(groups.size(), nullptr); // its list
        for (size_t g = 0; g < groups.size(); ++g)
            if (groups[g].kind == Group::Kind::Kernel) {
                auto& list = by_space[canonical_space(groups[g].space.get())];
                place[g] = list.size();
                list.push_back(int(g));
                space_of[g] = &list;
            }
        // b into a when they may share a kernel; whether they did
        auto try_merge = [&](size_t ua, int b) {
            const int a = int(ua);
            Group &ga = groups[ua], &gb = groups[size_t(b)];
            ++plan.sibling_pairs;
            bool ra = !ga.reduce_axes.empty(), rb = !gb.reduce_axes.empty();
            if (ra && rb && ga.reduce_axes != gb.reduce_axes)
                return false;
            // (Note [A reduction joins a kernel it shares a read with])
            if (ra != rb && shared_reads(ua, size_t(b)) == 0)
                return false;
            if (!fits(ua, size_t(b)))
                return false;
            // with the budget spent only groups of one depth (never dependent) merge
            if (--budget < 0 && depth[ua] != depth[size_t(b)])
                return false;
            if (rel.of != a)
                rel.reset(a, groups.size());
            if (related(b)) {
                // direct readers only: the transitive pairs of a chain are quadratic in number
                if (budget > 0 && (deps[ua].count(b) || deps[size_t(b)].count(a)))
                    plan.decisions.push_back("not merged: " + gb.roots[0]->describe(1) + " and " +
                                             ga.roots[0]->describe(1) + " depend on each other");
                return false;
            }
            // merge b into a; keep the reducing group's space first
            if (!ra && rb) {
                ga.space = gb.space;
                ga.reduce_axes = gb.reduce_axes;
                std::swap(ga.roots, gb.roots);
            }
            for (auto& r : gb.roots)
                ga.roots.push_back(r);
            gb.roots.clear();
            // a's relatives now include b's (b is independent of a, so none of them is a)
            if (rel.up_known)
                mark_from(b, deps, rel.up);
            if (rel.down_known)
                mark_from(b, rdeps, rel.down);
            absorb(a, b);
            alias[size_t(b)] = a;
            return true;
        };
        // Note [Siblings that share a read merge first]
        // A kernel group that depends on no other of its space can join any of them, and the
        // first candidate in group order took it. The index of a max pool's windows (Note [Max
        // pools as kernels] in src/backend/cpu/PoolKernels.cpp) reads the forward's activation
        // and is read in the backward: it joined a backward kernel of its space that shared no
        // read with it, which then read the activation again, from memory, long after the
        // forward. So first each group takes the later groups of its space that read a value it
        // reads (a value's readers, kSiblingCandidates at most), then the rest as before.
        std::unordered_map<const Node*, std::vector<int>> readers; // kernel groups, in order
        for (size_t g = 0; g < groups.size(); ++g)
            if (groups[g].kind == Group::Kind::Kernel && alias[g] == int(g))
                for (const Node* r : reads[g])
                    readers[r].push_back(int(g));
        for (size_t ua = 0; ua < groups.size(); ++ua) {
            if (groups[ua].kind != Group::Kind::Kernel || alias[ua] != int(ua))
                continue;
            const std::vector<const Node*> mine = reads[ua]; // (a merge adds to it)
            size_t looked = 0;
            for (const Node* r : mine) {
                for (int b : readers[r]) {
                    if (size_t(b) <= ua || alias[size_t(b)] != b ||
                        space_of[size_t(b)] != space_of[ua])
                        continue;
                    if (++looked > kSiblingCandidates)
                        break;
                    try_merge(ua, b);
                }
                if (looked > kSiblingCandidates)
                    break;
            }
        }
        rel.of = -1; // (what the merges changed is in no one's relatives yet)
        for (size_t ua = 0; ua < groups.size(); ++ua) {
            int a = int(ua);
            Group& ga = groups[ua];
            if (ga.kind != Group::Kind::Kernel || alias[ua] != a) continue;
            const std::vector<int>& list = *space_of[ua]; // (a merge keeps a group's space class)
            size_t looked = 0;
            for (size_t ib = place[ua] + 1; ib < list.size(); ++ib) {
                int b = list[ib];
                if (alias[size_t(b)] != b) continue;
                if (++looked > kSiblingCandidates)
                    break;
                try_merge(ua, b);
            }
        }
        // drop merged-away groups, renumber, order by dependencies
        std::vector<int> remap(groups.size(), -1);
        std::vector<Group> kept;
        for (size_t i = 0; i < groups.size(); ++i)
            if (alias[i] == int(i)) {
                remap[i] = int(kept.size());
                kept.push_back(std::move(groups[i]));
            }
        std::vector<std::set<int>> kdeps(kept.size());
        for (size_t i = 0; i < groups.size(); ++i)
            if (remap[i] >= 0)
                for (int d : deps[i]) kdeps[remap[i]].insert(remap[d]);
        group_of.for_each([&](const Node*, int& g) { g = remap[g]; });
        // topological order of groups
        std::vector<int> state(kept.size(), 0), topo;
        std::vector<std::pair<int, std::vector<int>>> stack;
        for (size_t s = 0; s < kept.size(); ++s) {
            if (state[s]) continue;
            stack.push_back({int(s), std::vector<int>(kdeps[s].begin(), kdeps[s].end())});
            state[s] = 1;
            while (!stack.empty()) {
                auto& [x, todo] = stack.back();
                if (!todo.empty()) {
                    int d = todo.back();
                    todo.pop_back();
                    SJ_ASSERT(state[d] != 1) << "fusion produced a cycle between groups";
                    if (!state[d]) {
                        state[d] = 1;
                        stack.push_back({d, std::vector<int>(kdeps[d].begin(), kdeps[d].end())});
                    }
                    continue;
                }
                state[x] = 2;
                topo.push_back(x);
                stack.pop_back();
            }
        }
        std::vector<int> pos(kept.size());
        for (size_t i = 0; i < topo.size(); ++i) pos[topo[i]] = int(i);
        for (int t : topo) plan.groups.push_back(std::move(kept[t]));
        group_of.for_each([&](const Node*, int& g) { g = pos[g]; });
    }

    // ---- per-point expressions -------------------------------------------------------------

    // Note [Canonical chain steps]
    // A value read through movement ops or an implicit broadcast is expanded once per (node,
    // chain) in a kernel, the chain being the steps from the kernel's point to the value's. A
    // step used to be its node, so two steps that map indices the same way but belong to
    // different nodes (each `h - m` of a chain broadcasting its own [4, 1] m over [4, 8]) made
    // two chains, and whatever the [4, 1] values read was expanded again under each: the
    // backward of 100 steps of `h - logsumexp(h) * 0.1` made a kernel of 12,000 instructions
    // and 1,500 loads past the size cap, and took 9 s in LLVM. A step's index map depends only
    // on its op, attributes and the shapes it maps between (KernelPlan's step()), so a step
    // whose shapes are static is replaced by the first node seen with the same ones; and a
    // movement step that undoes the one before it (flip(flip(x)), a transpose back) removes it:
    // 40 steps of flip(h) * c read c through chains of 0..40 flips before.
    std::unordered_map<std::string, std::pair<const Node*, int>> step_reps;
    std::pair<const Node*, int> canonical_step(const Node* n, int i) {
        const Node* in = n->input(size_t(i)).get();
        const bool movement = kind[n] == Kind::Movement;
        if (!is_static(n->shape()) || !is_static(in->shape()) ||
            (movement && n->num_inputs() != 1) || (!movement && !has_trait(n->op(), kElementwise)))
            return {n, i};
        std::string key =
            movement ? std::string(op_name(n->op())) + attrs_str(n->attrs()) : "elementwise";
        key += shape_str(n->shape()) + "<" + shape_str(in->shape());
        return step_reps.emplace(std::move(key), std::make_pair(n, i)).first->second;
    }

    /// Whether movement step `b` (read next, toward the buffer) undoes step `a`: the two map
    /// an index to itself. Same flips, or inverse permutations (a reshape is a view, never a
    /// step).
    static bool undoes(const std::pair<const Node*, int>& b, const std::pair<const Node*, int>& a) {
        const Node *x = a.first, *y = b.first;
        if (a.second != 0 || b.second != 0 || x->op() != y->op() || x->num_inputs() != 1 ||
            y->num_inputs() != 1 || y->input(0)->shape() != x->shape() || !is_static(x->shape()))
            return false;
        if (x->is(Op::Flip)) {
            auto fa = x->attr<AxesAttrs>().axes, fb = y->attr<AxesAttrs>().axes;
            std::sort(fa.begin(), fa.end());
            std::sort(fb.begin(), fb.end());
            return fa == fb;
        }
        if (x->is(Op::Permute)) {
            const auto &pa = x->attr<AxesAttrs>().axes, &pb = y->attr<AxesAttrs>().axes;
            if (pa.size() != pb.size())
                return false;
            for (size_t i = 0; i < pa.size(); ++i)
                if (pb[size_t(pa[i])] != int64_t(i))
                    return false;
            return true;
        }
        return false;
    }

    std::map<Chain, int> chain_ids;
    int intern(const Chain& c) {
        auto it = chain_ids.find(c);
        if (it != chain_ids.end()) return it->second;
        int id = static_cast<int>(plan.chains.size());
        plan.chains.push_back(c);
        chain_ids.emplace(c, id);
        return id;
    }

    void build_group(int gi) {
        Group& g = plan.groups[gi];
        std::map<std::pair<const Node*, int>, int> memo;
        std::map<std::pair<const Node*, int>, int> load_of;
        std::function<int(const Node*, int)> build = [&](const Node* n, int chain) -> int {
            // a scalar constant is the same at every point: one inst whatever the index map
            // (each consumer's broadcast makes its own chain)
            if (scalar_constant(n))
                chain = 0;
            auto key = std::make_pair(n, chain);
            if (auto it = memo.find(key); it != memo.end()) return it->second;
            KInst inst;
            inst.dtype = n->dtype();
            bool inline_expand = !has_trait(n->op(), kLeaf) &&
                                 ((group_of.count(n) && group_of[n] == gi && kind[n] != Kind::Reduce) ||
                                  inline_node(n));
            if (scalar_constant(n)) {
                inst.kind = KInst::Kind::Const;
                inst.value = n->attr<ConstantAttrs>().value.at(0);
            } else if (inline_expand && kind[n] == Kind::Movement) {
                Chain c = plan.chains[chain];
                const auto step = canonical_step(n, 0);
                if (!c.empty() && undoes(step, c.back()))
                    c.pop_back(); // flip(flip(x)), a transpose back: no step
                else
                    c.push_back(step);
                int v = build(n->input(0).get(), intern(c));
                memo[key] = v;
                return v;
            } else if (inline_expand) {
                inst.kind = KInst::Kind::Op;
                inst.op = n->op();
                for (size_t i = 0; i < n->num_inputs(); ++i) {
                    const Node* x = n->input(i).get();
                    int c = chain;
                    if (x->shape() != n->shape()) {
                        Chain cc = plan.chains[chain];
                        cc.push_back(canonical_step(n, int(i)));
                        c = intern(cc);
                    }
                    inst.args[i] = build(x, c);
                }
            } else {
                auto lk = std::make_pair(n, chain);
                auto it = load_of.find(lk);
                if (it == load_of.end()) {
                    it = load_of.emplace(lk, int(g.loads.size())).first;
                    g.loads.push_back({n->shared_from_this(), chain});
                }
                inst.kind = KInst::Kind::Load;
                inst.load = it->second;
            }
            g.insts.push_back(inst);
            int id = static_cast<int>(g.insts.size()) - 1;
            memo[key] = id;
            return id;
        };
        for (const auto& r : g.roots) {
            KOutput o;
            o.dtype = r->dtype();
            if (kind[r.get()] == Kind::Reduce) {
                o.reduced = true;
                o.reduce_op = r->op();
                o.value = build(r->input(0).get(), 0);
            } else {
                o.value = build(r.get(), 0);
            }
            g.outputs.push_back(o);
        }
    }
};

} // namespace

FusionPlan fuse(const std::vector<NodePtr>& roots, const Target& target) {
    Fuser f;
    f.target = &target;
    f.plan.chains.push_back({});
    f.chain_ids[{}] = 0;
    std::vector<const Node*> rs;
    for (const auto& r : roots) {
        rs.push_back(r.get());
        f.root_set.insert(r.get());
    }
    f.order = topo_order(rs);
    f.kind = detail::NodeMap<Kind>(f.order.size());
    f.users = detail::NodeMap<std::vector<const Node*>>(f.order.size());
    f.group_of = detail::NodeMap<int>(f.order.size());
    // users in graph order, never in address order: the plan must not depend on where nodes
    // were allocated, so that every rank of a data-parallel job runs its collectives in the
    // same order (docs/distributed.md)
    detail::NodeMap<size_t> position(f.order.size());
    for (size_t k = 0; k < f.order.size(); ++k)
        position[f.order[k]] = k;
    for (const Node* n : f.order) {
        f.kind[n] = classify(*n, target);
        for (size_t i = 0; i < n->num_inputs(); ++i)
            if (value_edge(*n, i)) f.users[n->input(i).get()].push_back(n);
    }
    // (Note [Values read for their shape alone]) users come after their inputs in f.order
    f.needed = detail::NodeMap<uint8_t>(f.order.size());
    for (auto it = f.order.rbegin(); it != f.order.rend(); ++it) {
        const Node* n = *it;
        bool need = f.root_set.count(n) != 0;
        if (const std::vector<const Node*>* us = f.users.find(n))
            for (const Node* u : *us)
                need = need || f.needed[u];
        f.needed[n] = need;
    }
    for (const Node* n : f.order) {
        std::vector<const Node*>* us = f.users.find(n);
        if (!us)
            continue;
        std::sort(us->begin(), us->end(), [&](const Node* a, const Node* b) {
            return *position.find(a) < *position.find(b);
        });
        us->erase(std::unique(us->begin(), us->end()), us->end());
    }
    f.budget = kMergeWorkBase + kMergeWorkPerNode * int64_t(f.order.size());
    f.classify_dims();
    f.find_epilogues();
    f.assign();
    f.merge_siblings();
    for (size_t g = 0; g < f.plan.groups.size(); ++g)
        if (f.plan.groups[g].kind == Group::Kind::Kernel) f.build_group(int(g));
    return std::move(f.plan);
}

std::string FusionPlan::str() const {
    std::ostringstream os;
    for (size_t i = 0; i < groups.size(); ++i) {
        const Group& g = groups[i];
        os << "group " << i << " (" << kind_name(g.kind) << "):";
        for (const auto& r : g.roots) os << " " << r->describe(1) << " " << type_str(r->type());
        if (!g.epilogue.empty()) {
            os << "  post-ops:";
            for (const auto& p : g.epilogue) os << " " << p.str();
            const NodePtr& r = g.result(0);
            os << " -> " << r->describe(1) << " " << type_str(r->type());
        }
        if (g.kind == Group::Kind::Kernel)
            os << "  [" << g.insts.size() << " insts, " << g.loads.size() << " loads, space "
               << shape_str(g.space->shape()) << ", reduce " << shape_str(g.reduce_axes) << "]";
        os << "\n";
    }
    for (const auto& d : decisions) os << "  " << d << "\n";
    return os.str();
}

} // namespace sj::compiler
