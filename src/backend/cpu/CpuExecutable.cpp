// The cpu backend's Executable: runs the fused groups (JIT kernels, GEMM, views, reference
// fallbacks) over call plans cached per input-shape signature.
#include "../../compiler/KernelPlan.h"
#include "../../compiler/Pipeline.h"
#include "../../ops/OpDef.h"
#include "../../runtime/Backend.h"
#include "../reference/Reference.h"
#include "Conv.h"
#include "Dot.h"
#include "Jit.h"
#include "Linalg.h"
#include "ThreadPool.h"

#include <symjax/Variable.h>

#include <chrono>
#include <cmath>
#include <functional>
#include <cstdio>
#include <map>
#include <sstream>
#include <unordered_map>

namespace sj::cpu {

using compiler::Group;

namespace {

/// Below this many iteration points a kernel runs on the calling thread alone.
constexpr int64_t kParallelPoints = 1 << 15;

// Note [Thread-count-independent sums]
// Results must not depend on the thread count (same build, same seed, any SJ_NUM_THREADS: the
// same bits; docs/reliability.md). A reduction whose loop 0 is reduced used to give each
// thread its own range: one thread summed everything in one pass, two threads summed halves
// and added them, so batch-norm gradients and the Adam moments behind them differed by up to
// 5e-6 between 1 and 2 threads. Now loop 0 is always cut into the same kReduceChunks ranges
// (fewer when it is shorter), each reduced into private outputs and combined in chunk order in
// double: the threads only decide who computes which chunk. Kernels below kParallelPoints
// run whole on one thread whatever the thread count, and kernels split over a kept loop give
// each thread whole output points, so neither depends on it either. The chunk count bounds the
// parallelism of such reductions (16 threads); its cost at one thread is a combine over 16
// partial outputs, which are small (the kept dims of a bias or batch-norm gradient).
constexpr int64_t kReduceChunks = 16;

struct GroupCall {
    compiler::KernelLaunch launch; // kernel groups
    KernelFn fn = nullptr;
    std::vector<int> in_slots;     // loads / operands
    std::vector<int> out_slots;    // roots
    std::vector<int> inplace_var;  // per output: written into this variable slot's buffer, or -1
    /// window groups: oneDNN's primitive for these shapes (null: the reference kernel runs)
    std::shared_ptr<const WindowPrimitive> window;
    std::vector<int> free_after;   // slots whose last reader is this group
    int64_t bytes = 0;
    double flops = 0;
};

struct CallPlan {
    std::vector<TensorType> types; // concrete type per slot
    /// Buffers of earlier calls, reused when nobody else holds them (no page faults, no
    /// allocator round trips on the hot path).
    mutable std::vector<Array> pool;
    std::vector<GroupCall> calls;  // per group
    /// Concrete types of every node (the epilogue of a library call that falls back to the
    /// reference kernels runs them on nodes that have no slot).
    std::unordered_map<const Node*, TensorType> node_types;
    int64_t intermediate_bytes = 0, peak_bytes = 0;
};

struct Profile {
    double ms = 0;
    int64_t calls = 0;
    double bytes = 0, flops = 0;
};

class CpuExecutable : public detail::Executable {
public:
    CpuExecutable(const detail::Program& p, const FunctionOptions& o) : p_(p), opts_(o) {
        std::vector<NodePtr> roots = p.outputs;
        for (const auto& u : p.updates) roots.push_back(u.second);
        auto t0 = std::chrono::steady_clock::now();
        c_ = compiler::compile(roots);
        // slots: every leaf and every group root of the rewritten graph
        std::vector<const Node*> rs;
        for (const auto& r : c_.roots) rs.push_back(r.get());
        order_ = topo_order(rs);
        auto add_slot = [&](const Node* n) {
            if (!slot_.count(n)) {
                slot_[n] = int(slot_nodes_.size());
                slot_nodes_.push_back(n);
            }
        };
        for (const Node* n : order_)
            if (has_trait(n->op(), kLeaf)) add_slot(n);
        for (const auto& g : c_.plan.groups)
            for (size_t k = 0; k < g.roots.size(); ++k) add_slot(g.result(k).get());
        for (size_t i = 0; i < p.inputs.size(); ++i) input_of_[p.inputs[i].get()] = int(i);
        for (size_t i = 0; i < p.variables.size(); ++i) var_of_[p.variables[i].get()] = int(i);
        stats_.nodes = order_.size();
        stats_.kernels = c_.plan.kernels();
        stats_.library_calls = c_.plan.library_calls();
        stats_.post_ops = c_.plan.post_ops();
        compile_ms_ = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        if (compiler::debug_level() >= 1)
            std::fprintf(stderr, "[symjax] compiled graph: %zu nodes -> %zu groups (%zu kernels, %zu library calls) in %.1f ms\n",
                         order_.size(), c_.plan.groups.size(), stats_.kernels, stats_.library_calls, compile_ms_);
    }

    ~CpuExecutable() override {
        if (opts_.profile) std::fprintf(stderr, "%s", profile_report().c_str());
    }

    FunctionStats stats() const override { return stats_; }
    std::string dump() const override { return c_.plan.str(); }

    std::string profile_report() const override {
        std::ostringstream os;
        os << "[symjax] profile (" << prof_.size() << " groups)\n";
        char line[256];
        std::snprintf(line, sizeof line, "  %-4s %-10s %10s %8s %10s %10s  %s\n", "#", "kind", "ms/call", "calls",
                      "GB/s", "GFLOP/s", "root");
        os << line;
        for (size_t i = 0; i < prof_.size(); ++i) {
            const Profile& p = prof_[i];
            if (!p.calls) continue;
            const Group& g = c_.plan.groups[i];
            const char* kind = g.kind == Group::Kind::Kernel     ? "kernel"
                               : g.kind == Group::Kind::Dot      ? "gemm"
                               : g.kind == Group::Kind::Window   ? "window"
                               : g.kind == Group::Kind::View     ? "view"
                               : library_kernel(g.roots[0]->op()) ? "lapack"
                                                                  : "reference";
            double s = p.ms / 1e3;
            std::snprintf(line, sizeof line, "  %-4zu %-10s %10.4f %8lld %10.2f %10.2f  %s\n", i, kind,
                          p.ms / double(p.calls), static_cast<long long>(p.calls), s > 0 ? p.bytes / s / 1e9 : 0.0,
                          s > 0 ? p.flops / s / 1e9 : 0.0, g.roots[0]->describe(1).c_str());
            os << line;
        }
        return os.str();
    }

    detail::ExecResult run(const std::vector<Array>& inputs, const std::vector<Array>& vals,
                           uint64_t counter) override {
        // the plan depends only on the shapes of inputs (variables and constants are static)
        std::string sig;
        for (const auto& a : inputs) sig += shape_str(a.shape());
        auto it = plans_.find(sig);
        if (it == plans_.end()) it = plans_.emplace(sig, make_plan(inputs)).first;
        const CallPlan& plan = it->second;
        if (plan.pool.size() != slot_nodes_.size()) plan.pool.resize(slot_nodes_.size());

        std::vector<Array> env(slot_nodes_.size());
        for (size_t s = 0; s < slot_nodes_.size(); ++s) {
            const Node* n = slot_nodes_[s];
            switch (n->op()) {
            case Op::Placeholder: env[s] = inputs[input_of_.at(n)]; break;
            case Op::Variable: env[s] = vals[var_of_.at(n)]; break;
            case Op::Constant: env[s] = n->attr<ConstantAttrs>().value; break;
            case Op::RngCounter: env[s] = Array::scalar<int64_t>(int64_t(counter)); break;
            default: break;
            }
        }
        if (prof_.size() != c_.plan.groups.size()) prof_.assign(c_.plan.groups.size(), {});
        for (size_t gi = 0; gi < c_.plan.groups.size(); ++gi) {
            const Group& g = c_.plan.groups[gi];
            const GroupCall& gc = plan.calls[gi];
            auto t0 = std::chrono::steady_clock::now();
            execute(g, gc, plan, env, counter);
            if (opts_.profile || compiler::debug_level() >= 2) {
                double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
                Profile& p = prof_[gi];
                p.ms += ms;
                ++p.calls;
                p.bytes += double(gc.bytes);
                p.flops += gc.flops;
                if (compiler::debug_level() >= 2)
                    std::fprintf(stderr, "[symjax] group %zu %s: %.3f ms\n", gi, g.roots[0]->describe(1).c_str(), ms);
            }
            if (opts_.nan_guard) check_finite(g, gc, env);
            for (int s : gc.free_after) env[s] = Array();
        }
        detail::ExecResult r;
        for (size_t k = 0; k < p_.outputs.size(); ++k) {
            const Node* n = c_.roots[k].get();
            Array a = env[slot_.at(n)];
            // a variable returned as an output must not alias its buffer (updates may write it)
            if (n->is(Op::Variable) || n->is(Op::Constant)) a = a.clone();
            r.outputs.push_back(a);
        }
        for (size_t k = 0; k < p_.updates.size(); ++k)
            r.new_values.push_back(env[slot_.at(c_.roots[p_.outputs.size() + k].get())]);
        return r;
    }

private:
    /// Binds the shapes of one call: concrete types for every node (which also checks every op
    /// on these shapes before anything runs), kernel launches and compiled code, buffer lifetimes.
    CallPlan make_plan(const std::vector<Array>& inputs) {
        CallPlan plan;
        std::unordered_map<const Node*, TensorType> types;
        for (const Node* n : order_) {
            switch (n->op()) {
            case Op::Placeholder: {
                auto it = input_of_.find(n);
                SJ_CHECK(it != input_of_.end(), InputError)
                    << "placeholder '" << n->name() << "' is not bound to a value";
                const Array& a = inputs[it->second];
                types[n] = {a.dtype(), a.shape()};
                break;
            }
            case Op::Variable: case Op::Constant: case Op::RngCounter: types[n] = n->type(); break;
            default: {
                std::vector<TensorType> in;
                for (const auto& i : n->inputs()) in.push_back(types.at(i.get()));
                detail::InferCtx ctx{n->op(), n->attrs(), in, &n->inputs(), true};
                try {
                    types[n] = detail::op_def(n->op()).infer(ctx);
                } catch (const ShapeError& e) {
                    throw InputError(e.what()); // at call time a shape clash comes from the inputs
                }
            }
            }
        }
        // an update whose value does not fit its variable fails now, before any kernel runs
        for (size_t k = 0; k < p_.updates.size(); ++k) {
            const Node* v = p_.variables[p_.updates[k].first].get();
            const TensorType& t = types.at(c_.roots[p_.outputs.size() + k].get());
            SJ_CHECK(t.shape == v->shape(), InputError)
                << "the update of variable '" << v->name() << "' " << type_str(v->type())
                << " produced a value of shape " << type_str(t) << " with these inputs; no variable was changed";
        }
        plan.types.resize(slot_nodes_.size());
        for (size_t s = 0; s < slot_nodes_.size(); ++s) plan.types[s] = types.at(slot_nodes_[s]);
        compiler::ShapeOf shape_of = [&](const Node* n) -> const Shape& { return types.at(n).shape; };

        // readers of each slot, to free buffers after their last use
        std::vector<int> last(slot_nodes_.size(), -1);
        auto operand_slots = [&](const Group& g) {
            std::vector<int> s;
            if (g.kind == Group::Kind::Kernel)
                for (const auto& l : g.loads) s.push_back(slot_.at(l.buffer.get()));
            else
                for (size_t i = 0; i < g.roots[0]->num_inputs(); ++i) {
                    const Node* x = g.roots[0]->input(i).get();
                    if (detail::shape_only_input(*g.roots[0], i)) continue;
                    if (slot_.count(x)) s.push_back(slot_.at(x));
                }
            for (const auto& p : g.epilogue)
                if (p.operand) s.push_back(slot_.at(p.operand.get()));
            return s;
        };
        for (size_t gi = 0; gi < c_.plan.groups.size(); ++gi)
            for (int s : operand_slots(c_.plan.groups[gi])) last[s] = int(gi);
        std::vector<bool> keep(slot_nodes_.size(), false);
        for (const auto& r : c_.roots) keep[slot_.at(r.get())] = true;
        // may a later group throw (a reference kernel's checks, or the NaN guard after any
        // group)? then no in-place writes, so a call that throws changes no variable
        bool fallback_after = opts_.nan_guard;
        std::vector<bool> throws_after(c_.plan.groups.size() + 1, opts_.nan_guard);
        for (size_t gi = c_.plan.groups.size(); gi-- > 0;) {
            fallback_after = fallback_after || c_.plan.groups[gi].kind == Group::Kind::Fallback;
            throws_after[gi] = fallback_after;
        }

        int64_t live = 0;
        for (size_t gi = 0; gi < c_.plan.groups.size(); ++gi) {
            const Group& g = c_.plan.groups[gi];
            GroupCall gc;
            gc.in_slots = operand_slots(g);
            for (size_t k = 0; k < g.roots.size(); ++k)
                gc.out_slots.push_back(slot_.at(g.result(k).get()));
            for (int s : gc.in_slots) gc.bytes += numel(plan.types[s].shape) * dtype_size(plan.types[s].dtype);
            for (int s : gc.out_slots) {
                int64_t b = numel(plan.types[s].shape) * dtype_size(plan.types[s].dtype);
                gc.bytes += b;
                if (!keep[s]) {
                    plan.intermediate_bytes += b;
                    live += b;
                }
            }
            plan.peak_bytes = std::max(plan.peak_bytes, live);
            if (g.kind == Group::Kind::Kernel) {
                gc.launch = compiler::plan_kernel(g, c_.plan, shape_of); // code: after the loop
                gc.flops = double(gc.launch.points) * double(g.insts.size());
                if (compiler::debug_level() >= 4)
                    std::fprintf(stderr, "[symjax] kernel %zu IR:\n%s", gi, gc.launch.spec.str().c_str());
                compiler::dump_file("kernel_" + std::to_string(gi) + ".txt", gc.launch.spec.str());
                if (compiler::debug_level() >= 4 || std::getenv("SJ_DUMP"))
                    compiler::dump_file("kernel_" + std::to_string(gi) + ".ll", kernel_llvm_ir(gc.launch.spec));
                gc.inplace_var.assign(g.roots.size(), -1);
                if (opts_.inplace_updates && !throws_after[gi])
                    for (size_t k = 0; k < g.roots.size(); ++k) gc.inplace_var[k] = inplace_candidate(g, k, gi, last);
            } else if (g.kind == Group::Kind::Dot) {
                const Node* r = g.roots[0].get();
                gc.flops = dot_flops(types.at(r->input(0).get()).shape, r->attr<DotAttrs>(), types.at(r).shape);
            } else if (g.kind == Group::Kind::Window) {
                const Node* r = g.roots[0].get();
                std::vector<TensorType> in;
                for (const auto& x : r->inputs()) in.push_back(types.at(x.get()));
                gc.window = window_primitive(*r, in, types.at(r), g.epilogue);
                gc.flops = window_flops(*r, in, types.at(r));
            }
            for (int s : gc.in_slots)
                if (last[s] == int(gi) && !keep[s] && !has_trait(slot_nodes_[s]->op(), kLeaf)) {
                    gc.free_after.push_back(s);
                    live -= numel(plan.types[s].shape) * dtype_size(plan.types[s].dtype);
                }
            plan.calls.push_back(std::move(gc));
        }
        // every kernel's code at once: one object per function (Note [One object per function])
        std::vector<const compiler::KernelSpec*> specs;
        for (size_t gi = 0; gi < c_.plan.groups.size(); ++gi)
            if (c_.plan.groups[gi].kind == Group::Kind::Kernel) specs.push_back(&plan.calls[gi].launch.spec);
        CompileInfo info;
        std::vector<KernelFn> fns = get_kernels(specs, &info);
        for (size_t gi = 0, k = 0; gi < c_.plan.groups.size(); ++gi)
            if (c_.plan.groups[gi].kind == Group::Kind::Kernel) plan.calls[gi].fn = fns[k++];
        if (compiler::debug_level() >= 1)
            std::fprintf(stderr, "[symjax] %zu kernels: %zu already loaded, %zu from the disk cache, %zu compiled; %.1f ms\n",
                         info.kernels, info.memory_hits, info.disk_hits, info.compiled, info.ms);
        plan.node_types = std::move(types);
        stats_.intermediate_bytes = plan.intermediate_bytes;
        stats_.peak_arena_bytes = plan.peak_bytes;
        return plan;
    }

    /// A kernel output (not a reduction) that is the new value of a variable the kernel reads
    /// only at the point it writes, and which nothing after it reads, may be written into the
    /// variable's buffer (each output of a multi-output kernel on its own: every output's value
    /// at a point is computed from loads at that point before any store there).
    int inplace_candidate(const Group& g, size_t root, size_t gi, const std::vector<int>& last) {
        if (g.outputs[root].reduced) return -1;
        size_t n_out = p_.outputs.size();
        for (size_t k = 0; k < p_.updates.size(); ++k) {
            if (c_.roots[n_out + k] != g.roots[root]) continue;
            const Node* var = p_.variables[p_.updates[k].first].get();
            if (!slot_.count(var)) return -1;
            int vs = slot_.at(var);
            if (last[vs] > int(gi)) return -1; // read later: keep the old value intact
            for (size_t o = 0; o < n_out; ++o)
                if (c_.roots[o].get() == var) return -1; // returned to the user
            for (int u = 0; u < int(p_.updates.size()); ++u)
                if (c_.roots[n_out + u].get() == var) return -1; // another variable takes its value
            for (const auto& l : g.loads)
                if (l.buffer.get() == var && l.chain != 0) return -1; // read elsewhere than written
            if (var->shape() != g.roots[root]->shape()) return -1;
            return vs;
        }
        return -1;
    }

    void execute(const Group& g, const GroupCall& gc, const CallPlan& plan, std::vector<Array>& env,
                 uint64_t counter) {
        switch (g.kind) {
        case Group::Kind::View: {
            const Node* r = g.roots[0].get();
            env[gc.out_slots[0]] = env[slot_.at(r->input(0).get())].reshape(plan.types[gc.out_slots[0]].shape);
            return;
        }
        case Group::Kind::Dot: {
            const Node* r = g.roots[0].get();
            const TensorType& t = plan.types[gc.out_slots[0]];
            Array out = buffer(plan, gc.out_slots[0], t);
            bool applied =
                dot_general(env[slot_.at(r->input(0).get())], env[slot_.at(r->input(1).get())],
                            r->attr<DotAttrs>(), out, g.epilogue, post_operands(g, env));
            if (!applied) out = epilogue_reference(g, out, plan, env, counter);
            env[gc.out_slots[0]] = std::move(out);
            return;
        }
        case Group::Kind::Window: {
            const Node* r = g.roots[0].get();
            if (!gc.window) { // oneDNN declined these shapes (or an operand is empty)
                std::vector<Array> ins = fallback_inputs(*r, env);
                if (g.epilogue.empty()) {
                    env[gc.out_slots[0]] = run_fallback(*r, ins, plan, counter);
                    return;
                }
                ref::KernelCtx ctx{*r, ins, plan.node_types.at(r), counter};
                env[gc.out_slots[0]] =
                    epilogue_reference(g, ref::kernel_for(r->op())(ctx), plan, env, counter);
                return;
            }
            const TensorType& t = plan.types[gc.out_slots[0]];
            Array out = buffer(plan, gc.out_slots[0], t);
            std::vector<const Array*> ins;
            for (size_t i = 0; i < r->num_inputs(); ++i) {
                auto it = slot_.find(r->input(i).get());
                ins.push_back(it != slot_.end() ? &env[it->second] : nullptr);
            }
            run_window(*gc.window, ins, out, post_operands(g, env));
            env[gc.out_slots[0]] = std::move(out);
            return;
        }
        case Group::Kind::Fallback: {
            const Node* r = g.roots[0].get();
            std::vector<Array> ins = fallback_inputs(*r, env);
            env[gc.out_slots[0]] = run_fallback(*r, ins, plan, counter);
            return;
        }
        case Group::Kind::Kernel: run_kernel(g, gc, plan, env); return;
        }
    }

    /// The operands of a library call's post-ops (null for those without one).
    std::vector<const Array*> post_operands(const Group& g, const std::vector<Array>& env) const {
        std::vector<const Array*> ops;
        for (const auto& p : g.epilogue)
            ops.push_back(p.operand ? &env[slot_.at(p.operand.get())] : nullptr);
        return ops;
    }

    /// The epilogue of a library call that did not apply it (the reference kernel ran, or the
    /// result is empty or had nothing to contract): its nodes' reference kernels on `value`,
    /// the call's own result.
    Array epilogue_reference(const Group& g, Array value, const CallPlan& plan,
                             const std::vector<Array>& env, uint64_t counter) const {
        std::unordered_map<const Node*, Array> memo{{g.roots[0].get(), std::move(value)}};
        std::function<Array(const Node*)> eval = [&](const Node* n) -> Array {
            if (auto it = memo.find(n); it != memo.end()) return it->second;
            if (auto s = slot_.find(n); s != slot_.end() && env[s->second].defined())
                return env[s->second];
            std::vector<Array> ins;
            for (size_t i = 0; i < n->num_inputs(); ++i) {
                const Node* x = n->input(i).get();
                auto s = slot_.find(x);
                if (!detail::shape_only_input(*n, i)) ins.push_back(eval(x));
                else ins.push_back(s != slot_.end() ? env[s->second] : Array());
            }
            ref::KernelCtx ctx{*n, ins, plan.node_types.at(n), counter};
            return memo[n] = ref::kernel_for(n->op())(ctx);
        };
        return eval(g.result(0).get());
    }

    /// The input values of a reference kernel (empty arrays for inputs that only give a shape and
    /// are not materialised).
    std::vector<Array> fallback_inputs(const Node& r, const std::vector<Array>& env) const {
        std::vector<Array> ins;
        for (const auto& i : r.inputs()) {
            auto it = slot_.find(i.get());
            ins.push_back(it != slot_.end() ? env[it->second] : Array());
        }
        return ins;
    }

    /// A reference kernel on the plan's (already checked) concrete output type. Inputs that only
    /// give a shape (philox's `like`) are not materialised: they get empty arrays.
    Array run_fallback(const Node& r, std::vector<Array>& ins, const CallPlan& plan, uint64_t counter) {
        const TensorType& t = plan.types[slot_.at(&r)];
        if (LibraryKernel k = library_kernel(r.op())) {
            Array out = buffer(plan, slot_.at(&r), t);
            k(r, ins, out);
            return out;
        }
        ref::KernelCtx ctx{r, ins, t, counter};
        return ref::kernel_for(r.op())(ctx);
    }

    void run_kernel(const Group& g, const GroupCall& gc, const CallPlan& plan, std::vector<Array>& env) {
        const auto& L = gc.launch;
        std::vector<Array> outs;
        for (size_t k = 0; k < gc.out_slots.size(); ++k) {
            const TensorType& t = plan.types[gc.out_slots[k]];
            int var = gc.inplace_var.empty() ? -1 : gc.inplace_var[k];
            if (var >= 0 && exclusively_ours(plan, env, var)) outs.push_back(env[var]);
            else outs.push_back(buffer(plan, gc.out_slots[k], t));
        }
        if (L.points == 0) {
            for (size_t k = 0; k < outs.size(); ++k)
                if (g.outputs[k].reduced) fill_identity(outs[k], g.outputs[k].reduce_op);
        } else {
            std::vector<void*> bufs;
            for (int s : gc.in_slots) bufs.push_back(const_cast<void*>(env[s].raw()));
            for (auto& o : outs) bufs.push_back(o.raw());
            ThreadPool& pool = ThreadPool::get();
            bool parallel = L.points >= kParallelPoints;
            int nt = parallel ? int(std::min<int64_t>(pool.threads(), L.outer)) : 1;
            if (parallel && L.split_reduce && L.outer > 1) {
                // reduction over loop 0: fixed chunks, whatever the thread count, each reduced
                // into private outputs, combined in chunk order (Note [Thread-count-independent
                // sums])
                int nc = int(std::min<int64_t>(kReduceChunks, L.outer));
                size_t nl = gc.in_slots.size();
                std::vector<std::vector<Array>> part(static_cast<size_t>(nc));
                std::vector<std::vector<void*>> tb(static_cast<size_t>(nc), bufs);
                for (int c = 0; c < nc; ++c)
                    for (size_t k = 0; k < outs.size(); ++k)
                        if (g.outputs[k].reduced) {
                            part[size_t(c)].emplace_back(outs[k].dtype(), outs[k].shape());
                            tb[size_t(c)][nl + k] = part[size_t(c)].back().raw();
                        } else {
                            part[size_t(c)].emplace_back();
                        }
                int tasks = std::min(nt, nc);
                pool.run(tasks, [&](int t) {
                    for (int c = t; c < nc; c += tasks) {
                        int64_t b = L.outer * c / nc, e = L.outer * (c + 1) / nc;
                        gc.fn(tb[size_t(c)].data(), L.params.data(), b, e);
                    }
                });
                for (size_t k = 0; k < outs.size(); ++k)
                    if (g.outputs[k].reduced) combine(outs[k], part, k, g.outputs[k].reduce_op);
            } else if (nt <= 1 || L.split_reduce) {
                gc.fn(bufs.data(), L.params.data(), 0, L.outer);
            } else {
                // kept loop 0: each thread computes whole output points of its range
                pool.run(nt, [&](int t) {
                    int64_t b = L.outer * t / nt, e = L.outer * (t + 1) / nt;
                    gc.fn(bufs.data(), L.params.data(), b, e);
                });
            }
        }
        for (size_t k = 0; k < gc.out_slots.size(); ++k) env[gc.out_slots[k]] = std::move(outs[k]);
    }

    /// The variable's buffer is held only by its state, the call's snapshot and our environment
    /// (and our buffer pool): nobody outside can see an in-place write.
    static bool exclusively_ours(const CallPlan& plan, const std::vector<Array>& env, int var) {
        const Array& v = env[var];
        long holders = v.use_count();
        for (const auto& p : plan.pool)
            if (p.shares_buffer(v)) --holders;
        return holders <= 3;
    }

    /// The output buffer of a slot: last call's if nobody else holds it, else a new one.
    Array buffer(const CallPlan& plan, int slot, const TensorType& t) const {
        Array& p = plan.pool[slot];
        if (!p.defined() || !p.unique() || p.shape() != t.shape || p.dtype() != t.dtype) {
            try {
                p = Array::uninitialized(t.dtype, t.shape);
            } catch (const OutOfMemoryError& e) { // say which value of the user's graph
                SJ_THROW(OutOfMemoryError)
                    << "cpu backend: the value of " << slot_nodes_[size_t(slot)]->describe()
                    << ": " << e.what();
            }
        }
        return p;
    }

    static void fill_identity(Array& a, Op op) {
        double v = op == Op::ReduceProd || op == Op::ReduceAll ? 1.0 : 0.0;
        a = Array::full(a.dtype(), a.shape(), v);
    }

    static void combine(Array& out, const std::vector<std::vector<Array>>& part, size_t k, Op op) {
        dispatch(out.dtype(), [&](auto tag) {
            using T = typename decltype(tag)::type;
            T* o = static_cast<T*>(out.raw());
            for (int64_t i = 0; i < out.size(); ++i) {
                double acc = 0;
                T m{};
                for (size_t t = 0; t < part.size(); ++t) {
                    T v = static_cast<const T*>(part[t][k].raw())[i];
                    if (t == 0) {
                        acc = double(v);
                        m = v;
                        continue;
                    }
                    switch (op) {
                    case Op::ReduceSum: acc += double(v); break;
                    case Op::ReduceProd: acc *= double(v); break;
                    case Op::ReduceMax:
                        if constexpr (std::is_floating_point_v<T>) m = (std::isnan(m) || std::isnan(v)) ? T(NAN) : std::max(m, v);
                        else m = std::max(m, v);
                        break;
                    case Op::ReduceMin:
                        if constexpr (std::is_floating_point_v<T>) m = (std::isnan(m) || std::isnan(v)) ? T(NAN) : std::min(m, v);
                        else m = std::min(m, v);
                        break;
                    case Op::ReduceAny: m = T(m || v); break;
                    case Op::ReduceAll: m = T(m && v); break;
                    default: break;
                    }
                }
                if constexpr (std::is_floating_point_v<T>) {
                    o[i] = (op == Op::ReduceSum || op == Op::ReduceProd) ? T(acc) : m;
                } else {
                    // integer sums wrap like the reference's accumulation in the integer type
                    if (op == Op::ReduceSum || op == Op::ReduceProd) {
                        T w = static_cast<const T*>(part[0][k].raw())[i];
                        for (size_t t = 1; t < part.size(); ++t) {
                            T v = static_cast<const T*>(part[t][k].raw())[i];
                            w = op == Op::ReduceSum ? T(w + v) : T(w * v);
                        }
                        o[i] = w;
                    } else {
                        o[i] = m;
                    }
                }
            }
        });
    }

    void check_finite(const Group& g, const GroupCall& gc, const std::vector<Array>& env) {
        for (size_t k = 0; k < gc.out_slots.size(); ++k)
            detail::check_finite(*g.roots[k], env[gc.out_slots[k]]);
    }

    detail::Program p_;
    FunctionOptions opts_;
    compiler::Compiled c_;
    std::vector<const Node*> order_;
    std::unordered_map<const Node*, int> slot_, input_of_, var_of_;
    std::vector<const Node*> slot_nodes_;
    std::map<std::string, CallPlan> plans_;
    std::vector<Profile> prof_;
    FunctionStats stats_;
    double compile_ms_ = 0;
};

} // namespace
} // namespace sj::cpu

namespace sj::detail {
std::unique_ptr<Executable> make_cpu_executable(const Program& p, const FunctionOptions& o) {
    return std::make_unique<cpu::CpuExecutable>(p, o);
}
} // namespace sj::detail
