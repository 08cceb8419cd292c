// The op table: names and traits from Ops.def, rules from each family's register function.
#include "OpDef.h"

#include <symjax/Ops.h>

#include <sstream>

namespace sj {

namespace {
using detail::DTypeClass;
using detail::FusionClass;
struct StaticRow {
    const char* name;
    int arity;
    uint32_t traits;
    DTypeClass dtypes;
    uint32_t shape_only;
    FusionClass fusion;
    int min_inputs, max_inputs;
};
constexpr StaticRow kRows[] = {
#define SJ_OP(Name, str, arity, traits, dtypes, shape_only, fusion, attrs, min_in, max_in)                \
    {str, arity, traits, DTypeClass::dtypes, shape_only, FusionClass::fusion, min_in, max_in},
#include <symjax/ir/Node.h>
#include <symjax/ir/Ops.def>
};

// What the rows promise the passes, checked when the library is compiled.
constexpr bool rows_consistent() {
    for (const StaticRow& r : kRows) {
        bool elementwise = (r.traits & kElementwise) != 0;
        if (elementwise != (r.fusion == FusionClass::Elementwise)) return false;
        if (((r.traits & kLeaf) != 0) != (r.fusion == FusionClass::Leaf)) return false;
        if (r.fusion == FusionClass::Window && (r.traits & kWindow) == 0) return false;
        if ((r.fusion == FusionClass::Reduce || r.fusion == FusionClass::Movement ||
             r.fusion == FusionClass::View) &&
            r.arity == 0)
            return false;
        // a shape-only input is an optional last input of a variadic op
        if (r.shape_only != 0 && r.arity != -1) return false;
        // the input counts: the arity of a fixed op; a range (max -1: unbounded) of a variadic one
        if (r.arity != -1 && (r.min_inputs != r.arity || r.max_inputs != r.arity)) return false;
        if (r.arity == -1 && r.max_inputs != -1 && r.max_inputs <= r.min_inputs) return false;
    }
    return true;
}
static_assert(rows_consistent(), "Ops.def: a row's fusion class, traits, shape_only mask and input "
                                 "counts disagree (see the column notes at the top of Ops.def)");
} // namespace

const char* op_name(Op op) { return kRows[static_cast<int>(op)].name; }
int op_arity(Op op) { return kRows[static_cast<int>(op)].arity; }
uint32_t op_traits(Op op) { return kRows[static_cast<int>(op)].traits; }

namespace detail {

namespace {
struct Table {
    OpDef rows[kNumOps];
    Table() {
        for (int i = 0; i < kNumOps; ++i) {
            const StaticRow& r = kRows[i];
            rows[i] = OpDef{r.name, r.arity, r.traits, r.dtypes, r.shape_only, r.fusion};
        }
        register_leaf_ops(rows);
        register_elementwise_ops(rows);
        register_reduce_ops(rows);
        register_sort_ops(rows);
        register_movement_ops(rows);
        register_indexing_ops(rows);
        register_linalg_ops(rows);
        register_conv_ops(rows);
        register_random_ops(rows);
        register_control_flow_ops(rows);
        register_collective_ops(rows);
        for (int i = 0; i < kNumOps; ++i)
            SJ_ASSERT(rows[i].infer) << "op '" << rows[i].name << "' has no type rule";
    }
};
} // namespace

const OpDef& op_def(Op op) {
    static const Table t;
    return t.rows[static_cast<int>(op)];
}

DTypeClass dtype_class(Op op) { return kRows[static_cast<int>(op)].dtypes; }
FusionClass fusion_class(Op op) { return kRows[static_cast<int>(op)].fusion; }
uint32_t shape_only_mask(Op op) { return kRows[static_cast<int>(op)].shape_only; }

void check_dtype_class(const InferCtx& c, size_t i, bool name_input) {
    DType t = c.in[i].dtype;
    // "conv(x, w): conv needs a float tensor (f32 or f64), got i32 (w); cast it first"
    std::string which = name_input ? " (" + c.name(i) + ")" : "";
    switch (dtype_class(c.op)) {
    case DTypeClass::Any: return;
    case DTypeClass::Numeric:
        SJ_CHECK(t != DType::Bool, TypeError) << c.where() << ": " << op_name(c.op)
                                              << " is not defined for bool tensors" << which
                                              << "; cast first";
        return;
    case DTypeClass::Float:
        SJ_CHECK(is_float(t), TypeError)
            << c.where() << ": " << op_name(c.op) << " needs a float tensor (f32 or f64), got "
            << dtype_name(t) << which << "; cast it first";
        return;
    case DTypeClass::Bool:
        SJ_CHECK(t == DType::Bool, TypeError) << c.where() << ": " << op_name(c.op)
                                              << " needs bool tensors, got " << dtype_name(t)
                                              << which;
        return;
    case DTypeClass::Int:
        SJ_CHECK(is_int(t), TypeError) << c.where() << ": " << op_name(c.op)
                                       << " needs an integer tensor, got " << dtype_name(t)
                                       << which;
        return;
    }
}

std::string InferCtx::name(size_t i) const {
    if (nodes && i < nodes->size()) return (*nodes)[i]->describe();
    return "input " + std::to_string(i);
}

std::string InferCtx::where() const {
    std::ostringstream os;
    os << op_name(op) << "(";
    for (size_t i = 0; i < in.size(); ++i) os << (i ? ", " : "") << name(i);
    os << ")";
    return os.str();
}

const Shape& InferCtx::static_shape(size_t i) const {
    if (at_runtime && nodes && i < nodes->size()) return (*nodes)[i]->shape();
    return in[i].shape;
}

void shape_fail(const InferCtx& c, const std::string& msg) {
    if (c.at_runtime) SJ_THROW(InputError) << msg;
    SJ_THROW(ShapeError) << msg;
}

void accumulate(Tensor& slot, const Tensor& g) {
    if (!g.defined()) return;
    slot = slot.defined() ? add(slot, g) : g;
}

} // namespace detail
} // namespace sj

namespace sj::detail {

Tensor make(Op op, const std::vector<Tensor>& inputs, Attrs attrs) {
    std::vector<NodePtr> nodes;
    nodes.reserve(inputs.size());
    for (const auto& t : inputs) nodes.push_back(t.node());
    return Tensor(Node::make(op, std::move(attrs), std::move(nodes)));
}

Tensor sum_to_shape(const Tensor& g, const Shape& shape) {
    const Shape& gs = g.shape();
    if (gs == shape) return g;
    int lead = static_cast<int>(gs.size()) - static_cast<int>(shape.size());
    SJ_ASSERT(lead >= 0) << "sum_to_shape: " << shape_str(gs) << " -> " << shape_str(shape);
    Axes ones;
    for (size_t i = 0; i < shape.size(); ++i)
        if (shape[i] == 1 && gs[i + lead] != 1) ones.push_back(static_cast<int64_t>(i + lead));
    Axes lead_axes;
    for (int i = 0; i < lead; ++i)
        lead_axes.push_back(i);
    if (ones.empty())
        return lead > 0 ? sum(g, lead_axes, false) : g;
    // one sum over every axis, not one over the size-1 dims and another over the leading ones: a
    // batch norm's dgamma and dbeta are then the very sums its dx needs (Note [Factoring
    // reductions] in src/compiler/Specialize.cpp), and the graph computes each once
    Axes all = lead_axes;
    all.insert(all.end(), ones.begin(), ones.end());
    Tensor r = sum(g, all, /*keepdims=*/true);
    return lead > 0 ? squeeze(r, lead_axes) : r;
}

Shape broadcast_shapes(const Shape& a, const Shape& b, const InferCtx& ctx) {
    size_t r = std::max(a.size(), b.size());
    Shape out(r);
    for (size_t i = 0; i < r; ++i) {
        int64_t da = i + a.size() >= r ? a[i + a.size() - r] : 1;
        int64_t db = i + b.size() >= r ? b[i + b.size() - r] : 1;
        int64_t d;
        if (da == db) d = da;
        else if (da == 1) d = db;
        else if (db == 1) d = da;
        else if (da == -1) d = db;
        else if (db == -1) d = da;
        else {
            SJ_THROW(ShapeError) << ctx.where() << ": shapes " << shape_str(a) << " and "
                                 << shape_str(b) << " do not broadcast (dim " << i << ": " << da
                                 << " vs " << db << ")";
        }
        out[i] = d;
    }
    return out;
}

} // namespace sj::detail
