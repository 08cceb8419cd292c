// The reference interpreter: runs a program node by node with the reference kernels.
#include "../../ops/OpDef.h"
#include "../Backend.h"
#include "../FloatMode.h"
#include "Reference.h"

#include <symjax/Interrupt.h>
#include <symjax/Variable.h>
#include <symjax/ir/ControlFlow.h>
#include <symjax/ir/Node.h>

#include <map>
#include <memory>
#include <unordered_map>

namespace sj::ref {

namespace {
struct KernelTable {
    Kernel rows[kNumOps] = {};
    KernelTable() {
        register_elementwise_kernels(rows);
        register_reduce_kernels(rows);
        register_sort_kernels(rows);
        register_movement_kernels(rows);
        register_indexing_kernels(rows);
        register_linalg_kernels(rows);
        register_conv_kernels(rows);
        register_random_kernels(rows);
        register_control_flow_kernels(rows);
        register_collective_kernels(rows);
        for (int i = 0; i < kNumOps; ++i)
            SJ_ASSERT(rows[i] || has_trait(Op(i), kLeaf))
                << "reference backend: op '" << op_name(Op(i)) << "' has no kernel";
    }
};
const KernelTable& kernels() {
    static const KernelTable t;
    return t;
}
} // namespace

Kernel kernel_for(Op op) { return kernels().rows[int(op)]; }

TensorType concrete_type(const Node& node, const std::vector<Array>& in) {
    std::vector<TensorType> types;
    types.reserve(in.size());
    for (const auto& a : in) types.push_back({a.dtype(), a.shape()});
    detail::InferCtx ctx{node.op(), node.attrs(), types, &node.inputs(), true, node.layout()};
    try {
        return detail::op_def(node.op()).infer(ctx);
    } catch (const ShapeError& e) {
        throw InputError(e.what()); // at call time a shape clash comes from the inputs given
    }
}

Array eval_node(const Node& node, const std::vector<Array>& in, uint64_t counter) {
    SJ_ASSERT(!has_trait(node.op(), kLeaf)) << "eval_node on a leaf";
    TensorType t = concrete_type(node, in);
    KernelCtx ctx{node, in, t, counter};
    Array out = kernels().rows[int(node.op())](ctx);
    SJ_ASSERT(out.dtype() == t.dtype && out.shape() == t.shape)
        << op_name(node.op()) << " kernel returned " << out.type_str() << ", expected "
        << type_str(t);
    return out;
}

namespace {

/// Executes a program with the reference kernels, freeing each intermediate after its last use.
class Interpreter : public detail::Executable {
public:
    Interpreter(const detail::Program& p, bool nan_guard, bool flush_denormals = false)
        : p_(p), nan_guard_(nan_guard), flush_denormals_(flush_denormals) {
        std::vector<const Node*> roots;
        for (const auto& o : p.outputs) roots.push_back(o.get());
        for (const auto& u : p.updates) roots.push_back(u.second.get());
        order_ = topo_order(roots);
        for (size_t i = 0; i < order_.size(); ++i) pos_[order_[i]] = i;
        for (size_t i = 0; i < p.inputs.size(); ++i) input_slot_[p.inputs[i].get()] = i;
        for (size_t i = 0; i < p.variables.size(); ++i) var_slot_[p.variables[i].get()] = i;
        last_use_.assign(order_.size(), 0);
        for (size_t i = 0; i < order_.size(); ++i)
            for (const auto& in : order_[i]->inputs()) last_use_[pos_[in.get()]] = i;
        for (const Node* r : roots) last_use_[pos_[r]] = order_.size(); // kept to the end
        for (const Node* n : order_) stats_.nodes += !has_trait(n->op(), kLeaf);
        for (const Node* n : order_)
            if (has_trait(n->op(), kRegion)) add_region_node(*n);
    }

    detail::ExecResult run(const std::vector<Array>& inputs, const std::vector<Array>& vals,
                           uint64_t counter) override {
        // (Note [Flushing denormals] in src/backend/FloatMode.h; a region's bodies run inside)
        detail::ScopedFlushDenormals flush(flush_denormals_);
        std::vector<Array> env(order_.size());
        std::vector<Array> ins;
        std::vector<std::vector<Array>> regions(groups_.size()); // each region's results, once run
        for (size_t i = 0; i < order_.size(); ++i) {
            const Node* n = order_[i];
            switch (n->op()) {
            case Op::Placeholder: {
                auto it = input_slot_.find(n);
                SJ_CHECK(it != input_slot_.end(), InputError)
                    << "placeholder '" << n->name() << "' is not bound to a value";
                env[i] = inputs[it->second];
                break;
            }
            case Op::Variable: env[i] = vals[var_slot_.at(n)]; break;
            case Op::Constant: env[i] = n->attr<ConstantAttrs>().value; break;
            case Op::RngCounter: env[i] = Array::scalar<int64_t>(int64_t(counter)); break;
#define SJ_CASES_OUTSIDE_Leaf
#include "ops/OpCasesOutside.inc" // Note [Family switches]
            {
                // it writes no variable (run() returns the new values), so it may stop anywhere
                if (poll_ && poll_interrupt())
                    SJ_THROW(Interrupted)
                        << "interrupted before " << n->describe() << "; no variable was changed";
                ins.clear();
                for (const auto& in : n->inputs()) ins.push_back(env[pos_[in.get()]]);
                env[i] = has_trait(n->op(), kRegion) ? region_result(*n, ins, counter, regions)
                                                     : eval_node(*n, ins, counter);
                if (nan_guard_)
                    detail::check_finite(*n, env[i]);
                for (const auto& in : n->inputs()) {
                    size_t j = pos_[in.get()];
                    if (last_use_[j] == i) env[j] = Array();
                }
            }
            }
        }
        detail::ExecResult r;
        for (const auto& o : p_.outputs) r.outputs.push_back(env[pos_[o.get()]]);
        for (const auto& u : p_.updates) r.new_values.push_back(env[pos_[u.second.get()]]);
        return r;
    }

    FunctionStats stats() const override { return stats_; }

private:
    /// A region's nodes in this program: their shared key, which results some node asks for, and
    /// the region's bodies as interpreters of their own (Note [Structured ops]).
    struct RegionGroup {
        std::vector<bool> wanted;
        std::unique_ptr<Interpreter> body[2];
    };

    void add_region_node(const Node& n) {
        const detail::Region& r = *n.attr<RegionAttrs>().region;
        auto [it, fresh] = group_of_key_.emplace(detail::region_key(n), groups_.size());
        if (fresh) {
            RegionGroup g;
            g.wanted.assign(size_t(r.num_results()), false);
            g.body[0] = std::make_unique<Interpreter>(detail::body_program(r.body), nan_guard_);
            if (r.kind != detail::RegionKind::Scan)
                g.body[1] = std::make_unique<Interpreter>(detail::body_program(r.body2), nan_guard_);
            // the loop polls once per iteration, naming itself
            for (auto& b : g.body)
                if (b)
                    b->poll_ = false;
            groups_.push_back(std::move(g));
        }
        groups_[it->second].wanted[size_t(n.attr<RegionAttrs>().output)] = true;
        group_of_node_[&n] = it->second;
    }


    /// n's value: its region run once per call for every result this program asks for.
    Array region_result(const Node& n, const std::vector<Array>& in, uint64_t counter,
                        std::vector<std::vector<Array>>& done) {
        size_t g = group_of_node_.at(&n);
        if (done[g].empty()) {
            RegionGroup& rg = groups_[g];
            BodyRunner run = [&](int which, const std::vector<Array>& args,
                                 const std::vector<Array>*) {
                return rg.body[which]->run(args, {}, counter).outputs;
            };
            done[g] = run_region(n, in, rg.wanted, run);
        }
        return done[g][size_t(n.attr<RegionAttrs>().output)];
    }

    std::vector<RegionGroup> groups_;
    std::map<detail::RegionKey, size_t> group_of_key_;
    std::unordered_map<const Node*, size_t> group_of_node_;
    detail::Program p_;
    bool nan_guard_;
    bool flush_denormals_;
    bool poll_ = true; // polls for an interrupt before each node (not in a loop's bodies)
    std::vector<const Node*> order_;
    std::unordered_map<const Node*, size_t> pos_, input_slot_, var_slot_;
    std::vector<size_t> last_use_;
    FunctionStats stats_;
};

} // namespace
} // namespace sj::ref

namespace sj::detail {
void register_reference_backend() {
    register_backend(
        "reference", [](const Program& p, const FunctionOptions& o) -> std::unique_ptr<Executable> {
            return std::make_unique<ref::Interpreter>(p, o.nan_guard, o.flush_denormals);
        });
}
} // namespace sj::detail
