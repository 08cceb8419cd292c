// compile(Program, Target) -> ExecPlan, and bind(): the shapes of one call.
#include "ExecPlan.h"

#include <symjax/ir/Node.h>

#include "../core/Verify.h"
#include "../ops/OpDef.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>

namespace sj::compiler {

// Note [Plans and runners]
// The compiler decides everything that does not depend on the values of a call: the rewritten
// graph, the fusion groups (which become steps: a generated kernel, a library call, a view, a
// reference fallback), the buffers (slots: every leaf and every value a step materialises), when
// each buffer dies and which update may be written into its variable's buffer (the memory plan,
// MemoryPlan.cpp). That is the ExecPlan, built once per function. What depends on the shapes
// of the inputs (-1 dims, bound per call) is bind(): every node's concrete type (the op rules
// run again on the concrete shapes, so a mismatch throws InputError before anything runs), each
// kernel's loops and strides (KernelPlan.cpp), the bytes moved. A backend caches one bound plan
// per input-shape signature, with what it made of it (compiled kernel code, library
// primitives), so a new batch size re-binds without re-running the passes. The runner then
// walks the steps: it owns only how a step runs (threads, buffers, library calls), never which
// steps there are or where their values live.

ExecPlan compile(const detail::Program& p, const Target& target, const PlanOptions& o) {
    ExecPlan plan;
    plan.program = p;
    plan.target = &target;
    plan.options = o;
    std::vector<NodePtr> roots = p.outputs;
    for (const auto& u : p.updates)
        roots.push_back(u.second);
    plan.compiled = compile(roots, target);
    const Compiled& c = plan.compiled;

    std::vector<const Node*> rs;
    for (const auto& r : c.roots)
        rs.push_back(r.get());
    plan.order = topo_order(rs);
    std::unordered_map<const Node*, int> input_of, var_of;
    for (size_t i = 0; i < p.inputs.size(); ++i)
        input_of[p.inputs[i].get()] = int(i);
    for (size_t i = 0; i < p.variables.size(); ++i)
        var_of[p.variables[i].get()] = int(i);
    auto add_slot = [&](const Node* n, SlotSource src, int index) {
        if (plan.slot_of.count(n))
            return;
        plan.slot_of[n] = int(plan.slots.size());
        plan.slots.push_back({n, src, index});
    };
    for (const Node* n : plan.order) {
        // an unbound placeholder gets no index: bind() reports it when the function is called
        if (n->is(Op::Placeholder)) {
            auto it = input_of.find(n);
            add_slot(n, SlotSource::Input, it == input_of.end() ? -1 : it->second);
        } else if (n->is(Op::Variable)) {
            auto it = var_of.find(n);
            SJ_ASSERT(it != var_of.end())
                << "variable " << n->describe() << " is not in the program";
            add_slot(n, SlotSource::Variable, it->second);
        } else if (n->is(Op::Constant)) {
            add_slot(n, SlotSource::Constant, -1);
        } else if (n->is(Op::RngCounter)) {
            add_slot(n, SlotSource::RngCounter, -1);
        } else {
            SJ_ASSERT(!has_trait(n->op(), kLeaf))
                << "leaf " << op_name(n->op()) << " has no slot source";
        }
    }
    for (const auto& g : c.plan.groups)
        for (size_t k = 0; k < g.roots.size(); ++k)
            add_slot(g.result(k).get(), SlotSource::Step, -1);

    // the slot a step reads n from: a value that no group computes (a node fused into another
    // group's epilogue and read from outside it, say) is the compiler's error, reported here
    // rather than read as a missing buffer when the step runs
    auto read_slot = [&](const Node* reader, const Node* n) {
        auto it = plan.slot_of.find(n);
        SJ_CHECK(it != plan.slot_of.end(), InternalError)
            << "plan: " << reader->describe(1) << " reads " << n->describe(1)
            << ", which no group computes";
        return it->second;
    };
    for (size_t gi = 0; gi < c.plan.groups.size(); ++gi) {
        const Group& g = c.plan.groups[gi];
        Step s;
        s.group = gi;
        s.kind = g.kind;
        if (g.kind == Group::Kind::Kernel) {
            for (const auto& l : g.loads)
                s.in_slots.push_back(read_slot(g.roots[0].get(), l.buffer.get()));
        } else {
            const Node* r = g.roots[0].get();
            for (size_t i = 0; i < r->num_inputs(); ++i) {
                if (detail::shape_only_input(*r, i))
                    continue;
                s.in_slots.push_back(read_slot(r, r->input(i).get()));
            }
        }
        for (const auto& po : g.epilogue)
            if (po.operand)
                s.in_slots.push_back(read_slot(g.roots[0].get(), po.operand.get()));
        for (size_t k = 0; k < g.roots.size(); ++k)
            s.out_slots.push_back(plan.slot_of.at(g.result(k).get()));
        plan.steps.push_back(std::move(s));
    }
    for (size_t k = 0; k < p.outputs.size(); ++k)
        plan.output_slots.push_back(plan.slot_of.at(c.roots[k].get()));
    for (size_t k = 0; k < p.updates.size(); ++k)
        plan.update_slots.push_back(plan.slot_of.at(c.roots[p.outputs.size() + k].get()));

    auto t0 = std::chrono::steady_clock::now();
    schedule_locality(plan);
    schedule_collectives(plan);
    plan_memory(plan);
    if (detail::verify_ir_enabled())
        verify_plan(plan);
    if (debug_level() >= 2)
        std::fprintf(
            stderr, "[symjax] %-12s %8.1f ms, %zu slots\n", "memory_plan",
            std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0)
                .count(),
            plan.slots.size());
    if (debug_level() >= 3)
        std::fprintf(stderr, "[symjax] plan:\n%s", plan.str().c_str());
    if (detail::dumping())
        dump_file("plan.txt", plan.str());
    return plan;
}

// Note [Steps follow their inputs]
// The fusion order is a depth-first walk from the roots in the program's order: outputs, then
// the updates in the order the user listed the variables, usually the layers' order. So a
// training step computed every layer's data gradient first (the first layer's update needs the
// whole backward chain) and the weight gradients and updates after it, in the layers' order: the
// last layer's weight gradient ran at the end of the step, long after the gradient it reads was
// written, and every activation stayed alive until then. schedule_locality reorders the steps as
// a list scheduler that always runs next a step made ready by the most recent one (a stack of
// ready steps), and of the steps one step makes ready, the one with the shortest way to the end
// of the plan first (its height): each weight gradient and its update now run as soon as the
// gradient they read exists, while it is still in cache, before the backward pass goes on, and
// steps that read only leaves run just before the first step that needs them. Any topological
// order computes the same values (the bits too: each step's arithmetic is its own); the memory
// plan (in-place updates, lifetimes) is made for the new order after it, and the collectives'
// order (Note [Collective overlap]) after that. Measured on the AMD EPYC, 2 threads
// (docs/performance.md, "Steps follow their inputs"): the MLP's training step 1-3% faster in
// paired rounds, the CNN steps the same within the noise (+-3%), and the paper network's step
// holds 17.1 MB live at most instead of 20.6.
//
// Note [Updates after their variable's readers]
// An update that can be written into its variable's buffer (the memory plan's in-place rule:
// its step reads the variable where it writes, and is the variable's last reader) lost that
// buffer whenever the scheduler ran it before another step reading the variable's old value:
// in a training step, the short branch (a weight's gradient and its update) runs before the
// data gradient that reads the same weight, so the MLP's and the CNNs' weight updates were
// written into fresh buffers, one more weight-sized buffer each, while the variable's own stayed
// allocated until the call ended. So each such update step also waits for the variable's other
// readers (an edge from each reader to it), unless a reader depends on the update itself (the
// edge would close a cycle). The update then runs right after the last of them, which has just
// read the variable. Values and bits are the same in any topological order.
void schedule_locality(ExecPlan& plan) {
    const size_t n = plan.steps.size();
    std::vector<int> producer(plan.slots.size(), -1);
    for (size_t si = 0; si < n; ++si)
        for (int s : plan.steps[si].out_slots)
            producer[size_t(s)] = int(si);
    std::vector<std::vector<int>> consumers(n);
    std::vector<int> missing(n, 0);
    auto add_edge = [&](int from, int to) {
        consumers[size_t(from)].push_back(to);
        ++missing[size_t(to)];
    };
    for (size_t si = 0; si < n; ++si) {
        std::vector<int> preds;
        for (int s : plan.steps[si].in_slots)
            if (producer[size_t(s)] >= 0)
                preds.push_back(producer[size_t(s)]);
        std::sort(preds.begin(), preds.end());
        preds.erase(std::unique(preds.begin(), preds.end()), preds.end());
        for (int p : preds)
            add_edge(p, int(si));
    }
    if (plan.options.inplace_updates && !plan.options.nan_guard) {
        std::vector<int> var_slot(plan.program.variables.size(), -1);
        for (size_t s = 0; s < plan.slots.size(); ++s)
            if (plan.slots[s].source == SlotSource::Variable && plan.slots[s].index >= 0)
                var_slot[size_t(plan.slots[s].index)] = int(s);
        std::vector<std::vector<int>> readers(plan.slots.size());
        for (size_t si = 0; si < n; ++si)
            for (int s : plan.steps[si].in_slots)
                if (plan.slots[size_t(s)].source == SlotSource::Variable &&
                    (readers[size_t(s)].empty() || readers[size_t(s)].back() != int(si)))
                    readers[size_t(s)].push_back(int(si));
        std::vector<int> seen(n, -1), stack;
        for (size_t k = 0; k < plan.update_slots.size(); ++k) {
            const int vs = var_slot[plan.program.updates[k].first];
            const int writer = producer[size_t(plan.update_slots[k])];
            if (vs < 0 || writer < 0)
                continue;
            const auto& rs = readers[size_t(vs)];
            if (std::find(rs.begin(), rs.end(), writer) == rs.end() || rs.size() < 2)
                continue; // not an in-place candidate, or nothing else reads the variable
            // the steps that depend on the writer (with the edges added so far)
            stack.assign(1, writer);
            seen[size_t(writer)] = int(k);
            while (!stack.empty()) {
                const int si = stack.back();
                stack.pop_back();
                for (int c : consumers[size_t(si)])
                    if (seen[size_t(c)] != int(k)) {
                        seen[size_t(c)] = int(k);
                        stack.push_back(c);
                    }
            }
            for (int r : rs)
                if (seen[size_t(r)] != int(k))
                    add_edge(r, writer);
        }
    }
    // a step's height: the most steps on a path from it to the end of the plan (in reverse
    // topological order: the added edges may point to an earlier step)
    std::vector<int> topo, left(missing);
    topo.reserve(n);
    for (size_t si = 0; si < n; ++si)
        if (left[si] == 0)
            topo.push_back(int(si));
    for (size_t i = 0; i < topo.size(); ++i)
        for (int c : consumers[size_t(topo[i])])
            if (--left[size_t(c)] == 0)
                topo.push_back(c);
    SJ_ASSERT(topo.size() == n) << "schedule_locality: the steps' dependencies have a cycle";
    std::vector<int> height(n, 0);
    for (size_t i = n; i-- > 0;)
        for (int c : consumers[size_t(topo[i])])
            height[size_t(topo[i])] = std::max(height[size_t(topo[i])], height[size_t(c)] + 1);
    std::vector<int> ready;
    for (size_t si = n; si-- > 0;) // the first in the fusion order on top
        if (missing[si] == 0)
            ready.push_back(int(si));
    std::vector<Step> order;
    order.reserve(n);
    std::vector<int> now;
    while (!ready.empty()) {
        const int si = ready.back();
        ready.pop_back();
        now.clear();
        for (int c : consumers[size_t(si)])
            if (--missing[size_t(c)] == 0)
                now.push_back(c);
        // the lowest on top: short branches (a weight gradient and its update) before the
        // chain that goes on (the next layer's data gradient); ties in the fusion order
        std::sort(now.begin(), now.end(), [&](int a, int b) {
            return height[size_t(a)] != height[size_t(b)] ? height[size_t(a)] > height[size_t(b)]
                                                          : a < b;
        });
        ready.insert(ready.end(), now.begin(), now.end());
        order.push_back(std::move(plan.steps[size_t(si)]));
    }
    SJ_ASSERT(order.size() == n) << "schedule_locality: the steps' dependencies have a cycle";
    plan.steps = std::move(order);
}

// Note [Collective overlap]
// Data-parallel training averages the gradients bucket by bucket (nn::average_gradients): an
// all_reduce per bucket, and the optimizer's updates read the results. The plan used to run
// them in the fusion order, each all_reduce blocking and its updates right after it, so every
// byte of communication sat on the step's critical path. Two things overlap it with the rest of
// the backward pass. Here, the steps that read (directly or through other steps) the result of
// an all_reduce move after every step that does not, keeping their relative order: each bucket's
// all_reduce then runs as soon as its gradients exist, and the backward pass of the earlier
// layers runs while it is on the wire. In the cpu runner, an all_reduce step only posts the
// collective (MPI_Iallreduce); between steps the runner lets MPI move the posted ones on
// (MPI_Test), and it waits for one before the first step that reads its result, for all of them
// before any step that writes a variable in place (so a failed collective still changes no
// variable), and before the call returns. FunctionOptions::overlap_collectives = false waits at
// each all_reduce, for comparison (`bench/run dist` measures both); the order of the steps
// stays. Results do not change: the same collectives in the same order on every rank, the same
// arithmetic.
void schedule_collectives(ExecPlan& plan) {
    auto collective = [&](const Step& st) {
        return st.kind == StepKind::Fallback && plan.group(st).roots[0]->is(Op::AllReduce);
    };
    if (std::none_of(plan.steps.begin(), plan.steps.end(), collective))
        return;
    std::vector<char> after(plan.slots.size(), 0); // computed from an all_reduce's result
    std::vector<Step> early, late;
    for (Step& st : plan.steps) {
        bool reads = false;
        for (int s : st.in_slots)
            reads |= after[size_t(s)] != 0;
        if (reads || collective(st))
            for (int s : st.out_slots)
                after[size_t(s)] = 1;
        (reads ? late : early).push_back(std::move(st));
    }
    early.insert(early.end(), std::make_move_iterator(late.begin()),
                 std::make_move_iterator(late.end()));
    plan.steps = std::move(early);
}

void verify_plan(const ExecPlan& plan) {
    enum State : uint8_t { Undefined, Live, Freed };
    std::vector<State> state(plan.slots.size(), Undefined);
    std::vector<int> writer(plan.slots.size(), -1);
    for (size_t s = 0; s < plan.slots.size(); ++s)
        if (plan.slots[s].source != SlotSource::Step)
            state[s] = Live;
    const std::vector<int> last = last_readers(plan);
    const std::vector<bool> kept = kept_slots(plan);
    auto where = [&](size_t k, int s) {
        return "plan verifier: step " + std::to_string(k) + " (" +
               plan.group(plan.steps[k]).roots[0]->describe(1) + "), slot %" + std::to_string(s) +
               " (" + plan.slots[size_t(s)].node->describe(1) + ")";
    };
    for (size_t k = 0; k < plan.steps.size(); ++k) {
        const Step& st = plan.steps[k];
        for (int s : st.in_slots)
            SJ_CHECK(state[size_t(s)] == Live, InternalError)
                << where(k, s) << ": read while "
                << (state[size_t(s)] == Freed ? "freed" : "not yet computed");
        if (st.kind == StepKind::View) { // runners read a view's source as its first read
            const Node* src = plan.group(st).roots[0]->input(0).get();
            auto it = plan.slot_of.find(src);
            SJ_CHECK(!st.in_slots.empty() && it != plan.slot_of.end() &&
                         st.in_slots[0] == it->second,
                     InternalError)
                << "plan verifier: view step " << k << " (" << plan.group(st).roots[0]->describe(1)
                << ") does not read its source first";
        }
        for (int s : st.out_slots) {
            SJ_CHECK(plan.slots[size_t(s)].source == SlotSource::Step && writer[size_t(s)] < 0,
                     InternalError)
                << where(k, s) << ": written twice, or a leaf written";
            writer[size_t(s)] = int(k);
            state[size_t(s)] = Live;
        }
        SJ_CHECK(st.inplace_var.empty() || st.inplace_var.size() == st.out_slots.size(),
                 InternalError)
            << "plan verifier: step " << k << " has " << st.inplace_var.size()
            << " in-place entries for " << st.out_slots.size() << " outputs";
        for (size_t o = 0; o < st.inplace_var.size(); ++o) {
            int v = st.inplace_var[o];
            if (v < 0)
                continue;
            SJ_CHECK((st.kind == StepKind::Kernel || st.kind == StepKind::Dot) &&
                         plan.slots[size_t(v)].source == SlotSource::Variable &&
                         plan.slots[size_t(v)].node->type() ==
                             plan.slots[size_t(st.out_slots[o])].node->type() &&
                         last[size_t(v)] <= int(k),
                     InternalError)
                << where(k, st.out_slots[o]) << ": written in place of "
                << plan.slots[size_t(v)].node->describe(1)
                << ", which is not a variable of its type read by nothing after the step";
        }
        for (size_t o = 0; o < st.donor.size(); ++o) {
            int d = st.donor[o];
            if (d < 0)
                continue;
            SJ_CHECK((st.kind == StepKind::Kernel || st.kind == StepKind::Window) &&
                         std::find(st.free_after.begin(), st.free_after.end(), d) !=
                             st.free_after.end() &&
                         plan.slots[size_t(d)].node->type() ==
                             plan.slots[size_t(st.out_slots[o])].node->type() &&
                         !kept[size_t(st.out_slots[o])],
                     InternalError)
                << where(k, st.out_slots[o]) << ": written into the buffer of "
                << plan.slots[size_t(d)].node->describe(1)
                << ", which is not a value of its type dying at the step";
        }
        for (int s : st.free_after) {
            SJ_CHECK(last[size_t(s)] == int(k) && !kept[size_t(s)] &&
                         plan.slots[size_t(s)].source == SlotSource::Step &&
                         state[size_t(s)] == Live,
                     InternalError)
                << where(k, s) << ": freed, but it is read later, kept, a leaf or not live";
            state[size_t(s)] = Freed;
        }
    }
    for (int s : plan.output_slots)
        SJ_CHECK(state[size_t(s)] == Live, InternalError)
            << "plan verifier: output slot %" << s << " never computed";
    for (int s : plan.update_slots)
        SJ_CHECK(state[size_t(s)] == Live, InternalError)
            << "plan verifier: update slot %" << s << " never computed";
}

BoundPlan bind(const ExecPlan& plan, const std::vector<TensorType>& inputs) {
    BoundPlan b;
    auto& types = b.node_types;
    types = detail::NodeMap<TensorType>(plan.order.size());
    for (const Node* n : plan.order) {
        if (n->is(Op::Placeholder)) {
            int i = plan.slots[size_t(plan.slot_of.at(n))].index;
            SJ_CHECK(i >= 0, InputError)
                << "placeholder '" << n->name() << "' is not bound to a value";
            types[n] = inputs.at(size_t(i));
        } else if (has_trait(n->op(), kLeaf)) {
            types[n] = n->type();
        } else {
            std::vector<TensorType> in;
            for (const auto& i : n->inputs())
                in.push_back(types.at(i.get()));
            detail::InferCtx ctx{n->op(), n->attrs(), in, &n->inputs(), true, n->layout()};
            try {
                types[n] = detail::op_def(n->op()).infer(ctx);
            } catch (const ShapeError& e) {
                throw InputError(e.what()); // at call time a shape clash comes from the inputs
            }
        }
    }
    // an update whose value does not fit its variable fails now, before any step runs
    const detail::Program& p = plan.program;
    for (size_t k = 0; k < p.updates.size(); ++k) {
        const Node* v = p.variables[p.updates[k].first].get();
        const TensorType& t = types.at(plan.slots[size_t(plan.update_slots[k])].node);
        SJ_CHECK(t.shape == v->shape(), InputError)
            << "the update of variable '" << v->name() << "' " << type_str(v->type())
            << " produced a value of shape " << type_str(t)
            << " with these inputs; no variable was changed";
    }
    b.types.resize(plan.slots.size());
    for (size_t s = 0; s < plan.slots.size(); ++s)
        b.types[s] = types.at(plan.slots[s].node);
    ShapeOf shape_of = [&](const Node* n) -> const Shape& { return types.at(n).shape; };
    auto bytes = [&](int s) {
        return numel(b.types[size_t(s)].shape) * dtype_size(b.types[size_t(s)].dtype);
    };

    const std::vector<bool> keep = kept_slots(plan);
    int64_t live = 0;
    for (const Step& s : plan.steps) {
        BoundStep bs;
        for (int i : s.in_slots)
            bs.bytes += bytes(i);
        for (int o : s.out_slots) {
            bs.bytes += bytes(o);
            if (!keep[size_t(o)]) {
                b.intermediate_bytes += bytes(o);
                live += bytes(o);
            }
        }
        b.peak_bytes = std::max(b.peak_bytes, live);
        if (s.kind == StepKind::Kernel) {
            const Group& g = plan.group(s);
            bs.launch = plan_kernel(g, plan.compiled.plan, shape_of, plan.target->vector_lanes());
            int64_t ops = 0;
            for (const auto& k : g.insts) ops += k.kind == KInst::Kind::Op;
            bs.work = bs.bytes + kWorkPerOp * ops * bs.launch.points;
        }
        for (int f : s.free_after)
            live -= bytes(f);
        b.steps.push_back(std::move(bs));
    }
    return b;
}

namespace {
const char* source_name(SlotSource s) {
    switch (s) {
    case SlotSource::Input:
        return "input";
    case SlotSource::Variable:
        return "variable";
    case SlotSource::Constant:
        return "constant";
    case SlotSource::RngCounter:
        return "rng_counter";
    case SlotSource::Step:
        return "step";
    }
    return "?";
}
} // namespace

std::string ExecPlan::str() const {
    std::ostringstream os;
    os << "plan for target " << (target ? target->name() : "?") << ": " << slots.size()
       << " slots, " << steps.size() << " steps\n";
    for (size_t i = 0; i < slots.size(); ++i) {
        const Slot& s = slots[i];
        if (s.source == SlotSource::Step)
            continue;
        os << "  %" << i << " = " << source_name(s.source);
        if (s.index >= 0)
            os << " " << s.index;
        os << " " << type_str(s.node->type()) << "  " << s.node->describe(1) << "\n";
    }
    for (size_t k = 0; k < steps.size(); ++k) {
        const Step& s = steps[k];
        os << "  step " << k << " " << kind_name(s.kind) << " (";
        for (size_t i = 0; i < s.in_slots.size(); ++i)
            os << (i ? ", %" : "%") << s.in_slots[i];
        os << ") -> ";
        for (size_t i = 0; i < s.out_slots.size(); ++i) {
            os << (i ? ", %" : "%") << s.out_slots[i];
            if (!s.inplace_var.empty() && s.inplace_var[i] >= 0)
                os << " in place of %" << s.inplace_var[i];
            if (!s.donor.empty() && s.donor[i] >= 0)
                os << " in %" << s.donor[i] << "'s buffer";
        }
        if (!s.free_after.empty()) {
            os << "; frees";
            for (int f : s.free_after)
                os << " %" << f;
        }
        os << "  " << group(s).roots[0]->describe(1) << "\n";
    }
    os << "  outputs";
    for (int s : output_slots)
        os << " %" << s;
    os << "\n  updates";
    for (size_t k = 0; k < update_slots.size(); ++k)
        os << " " << program.variables[program.updates[k].first]->describe(1) << " <- %"
           << update_slots[k];
    os << "\n";
    return os.str();
}

} // namespace sj::compiler
