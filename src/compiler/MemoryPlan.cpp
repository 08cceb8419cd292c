// Pass: the memory plan. Decides, once per function, when each buffer dies and which updates are
// written into their variable's own buffer; and, once per bound call, which values share a buffer.
#include "ExecPlan.h"

#include <symjax/ir/Node.h>

#include "../core/NodeMap.h"

#include <algorithm>
#include <map>
#include <numeric>

namespace sj::compiler {

// Note [Memory plan]
// Slots are the plan's buffers. A slot computed by a step is freed right after its last reader
// (free_after), unless it is a function output or an update's value; leaves are never freed (the
// caller and the variables own them). A runner may then hand the freed buffer to a later step.
//
// In-place updates (FunctionOptions::inplace_updates): a kernel output that is not a reduction
// and is the new value of a variable may be written into the variable's buffer when
//   - nothing after the step reads the variable (the old value must stay intact until then),
//   - the kernel reads the variable only at the point it writes (a load through the empty chain:
//     every output's value at a point is computed from loads at that point before any store),
//   - the variable is no output and no other variable's new value (those keep the old buffer),
//   - the shapes agree statically,
//   - no later step can throw (a reference kernel's checks, or the NaN guard after any step), so
//     a call that throws still changes no variable (Note [Consistent snapshots]); the cpu runner
//     stops polling for interrupts at the first such step (Note [Interrupts between steps]).
// A matmul whose sum post-op adds its result to the variable (v' = 0.9 v + dW) writes in place
// under the same rules, when it does not read the variable as a factor (Note [Accumulating
// post-op] in Fusion.cpp).
// The runner makes the final check at run time: the buffer is written in place only when no one
// outside the call holds it.
//
// Note [Buffers shared by lifetime]
// The cpu runner's pool keeps buffers between calls per entry. An entry was a slot's own, so a
// call touched one buffer per value it computed: the SymJAX paper network's training step 34 MB
// of intermediates, while at most 20.6 MB are alive at once. A value written into memory no
// other value used for a whole step comes from DRAM (a write fetches its lines first): layer 0's
// max-pool backward wrote its 4 MB at a third of the speed of the same primitive run in a loop.
// So share_buffers, run per bound call (the types are concrete only then), gives a slot the entry
// of an earlier slot of the same type (dtype and shape) that died before the slot's step, the
// most recently dead first (LIFO: its lines are the likeliest still in cache), and its own entry
// otherwise. A buffer dies when every view of it is freed (free_after above), a library call's
// result written into the value its sum post-op adds (the cpu runner's accumulator()) counting
// as a view; so outputs, values a variable takes in place, views that outlive the call and the
// operands of an all_reduce that may still be reading them after its step (Note [Collective
// overlap]) keep their own entries. The runner's pool checks at run time: an entry whose buffer
// someone still holds (a reference kernel that returned its input, say) gets a fresh buffer, so
// sharing can cost an allocation, never a wrong value. Measured (docs/performance.md, "Buffers
// shared by lifetime"): the paper network's step holds 30 MB less (peak RSS 126 -> 96 MB) and
// runs 1-5% faster.

// Note [Kernel outputs in dying inputs' buffers]
// A value written into memory that nothing touched for a while costs twice: the write fetches
// each line from DRAM first. In a training step the typical case is a kernel that reads a large
// value for the last time at the points it writes its own: batch norm's backward writes dx
// reading the convolution's output y and the incoming gradient, both dead after it. Shared by
// lifetime (below), dx takes the buffer of a value that died before the step: on the SymJAX
// paper network, the first layer's 4 MB dx went into the buffer of the activation the forward
// pass wrote (cold by then). So plan_memory names, per stored output of a kernel, a donor: an
// input slot of the output's type whose last reader is this step, read by the kernel only at
// the point it writes (a load through the empty chain, as for in-place variable updates, Note
// [Memory plan]) and feeding the stored value (so its load precedes the store at each point),
// and neither an output nor an update's value. The output then takes the donor's buffer: its
// lines were just read, so the store finds them in cache. share_buffers counts the two as one
// buffer, like a view; the cpu runner checks at run time that nothing else holds the donor's
// buffer and that the concrete types agree, and takes a buffer of the output's own otherwise.
// A library call's result takes a donor only where the target says the call reads that input
// whole before it writes (Target::writes_over_input): the cpu target's max-pool backward, whose
// dx goes into the buffer of the pool's input x. That saves the largest buffer of a CNN's first
// layer (4 MB in the paper network at batch 32), which x held through the backward pass only
// for this call.

namespace {

/// Whether kernel group g reads `v` only at the point it writes (every load of v through the
/// empty chain): the condition for writing v's buffer in place (Note [Memory plan]).
bool read_where_written(const Group& g, const Node* v) {
    return std::none_of(g.loads.begin(), g.loads.end(),
                        [&](const LoadSite& l) { return l.buffer.get() == v && l.chain != 0; });
}

/// Per load of g, whether the stored value `value` (an instruction of g.insts) reads it.
std::vector<bool> loads_reached(const Group& g, int value) {
    std::vector<bool> reached(g.loads.size(), false), seen(g.insts.size(), false);
    std::vector<int> stack{value};
    while (!stack.empty()) {
        int i = stack.back();
        stack.pop_back();
        if (i < 0 || seen[size_t(i)])
            continue;
        seen[size_t(i)] = true;
        const KInst& k = g.insts[size_t(i)];
        if (k.kind == KInst::Kind::Load)
            reached[size_t(k.load)] = true;
        for (int a : k.args)
            stack.push_back(a);
    }
    return reached;
}

/// The donor of each output of step `s`, a kernel or a library call the target lets write over
/// an input (Note [Kernel outputs in dying inputs' buffers]).
std::vector<int> donors(const ExecPlan& plan, const Step& s, const std::vector<bool>& keep) {
    std::vector<int> out(s.out_slots.size(), -1);
    if (s.kind != StepKind::Kernel && s.kind != StepKind::Window)
        return out;
    const Group& g = plan.group(s);
    // a value computed by a step, dying here and not kept
    auto may_give = [&](int x) {
        return plan.slots[size_t(x)].source == SlotSource::Step && !keep[size_t(x)];
    };
    if (s.kind == StepKind::Window) { // one output; the target names the inputs it may take
        const Node* r = g.roots[0].get();
        if (keep[size_t(s.out_slots[0])] || !g.epilogue.empty())
            return out;
        const Node* result = plan.slots[size_t(s.out_slots[0])].node;
        for (size_t i = 0; i < r->num_inputs(); ++i) {
            if (!plan.target->writes_over_input(*r, i))
                continue;
            auto x = plan.slot_of.find(r->input(i).get());
            const bool dies = x != plan.slot_of.end() &&
                              std::find(s.free_after.begin(), s.free_after.end(), x->second) !=
                                  s.free_after.end();
            if (dies && may_give(x->second) && r->input(i)->type() == result->type()) {
                out[0] = x->second;
                break;
            }
        }
        return out;
    }
    // the candidates: inputs dying here that the kernel reads only where it writes, each with
    // its loads (found once per step: merged kernels have hundreds)
    std::vector<std::pair<int, std::vector<size_t>>> dying;
    for (int x : s.free_after)
        if (may_give(x) && read_where_written(g, plan.slots[size_t(x)].node))
            dying.push_back({x, {}});
    if (dying.empty())
        return out;
    for (size_t l = 0; l < g.loads.size(); ++l)
        for (auto& [x, loads] : dying)
            if (g.loads[l].buffer.get() == plan.slots[size_t(x)].node)
                loads.push_back(l);
    for (size_t k = 0; k < s.out_slots.size(); ++k) {
        const int o = s.out_slots[k];
        if (g.outputs[k].reduced || g.outputs[k].carry >= 0 || keep[size_t(o)] ||
            (!s.inplace_var.empty() && s.inplace_var[k] >= 0))
            continue;
        const std::vector<bool> reached = loads_reached(g, g.outputs[k].value);
        for (auto& [x, loads] : dying) {
            if (plan.slots[size_t(x)].node->type() != plan.slots[size_t(o)].node->type() ||
                std::none_of(loads.begin(), loads.end(), [&](size_t l) { return reached[l]; }))
                continue;
            out[k] = x;
            loads.clear(); // taken
            break;
        }
    }
    return out;
}

/// Whether a matmul's epilogue adds its result to `var` (any value when null) with a sum
/// post-op (Note [Accumulating post-op] in Fusion.cpp).
bool accumulates_into(const Group& g, const Node* var) {
    const PostOp* p = sum_post_op(g.epilogue);
    return p && (!var || p->operand.get() == var);
}

/// What the in-place decisions look up per step output, made once per plan (a function of
/// many updates would otherwise compare every output with every update).
struct UpdateIndex {
    detail::NodeMap<size_t> first_update; // an update's new value -> its first update index
    detail::NodeMap<uint8_t> kept;        // function outputs and updates' new values
};

UpdateIndex index_updates(const ExecPlan& plan) {
    UpdateIndex ix;
    const auto& roots = plan.compiled.roots;
    const size_t n_out = plan.program.outputs.size();
    for (size_t k = 0; k < roots.size(); ++k) {
        ix.kept.insert(roots[k].get());
        if (k >= n_out)
            ix.first_update.insert(roots[k].get(), k - n_out);
    }
    return ix;
}

int inplace_candidate(const ExecPlan& plan, const UpdateIndex& ix, const Step& s, size_t root,
                      size_t si, const std::vector<int>& last) {
    const Group& g = plan.group(s);
    if (g.kind == Group::Kind::Kernel ? g.outputs[root].reduced : !accumulates_into(g, nullptr))
        return -1;
    const detail::Program& p = plan.program;
    if (const size_t* k = ix.first_update.find(g.result(root).get())) {
        const Node* var = p.variables[p.updates[*k].first].get();
        auto vs = plan.slot_of.find(var);
        if (vs == plan.slot_of.end())
            return -1;
        if (last[size_t(vs->second)] > int(si))
            return -1; // read later: keep the old value intact
        if (ix.kept.contains(var))
            return -1; // returned to the user, or another variable takes its value
        if (!read_where_written(g, var))
            return -1;
        if (g.kind == Group::Kind::Dot &&
            (!accumulates_into(g, var) || g.roots[0]->input(0).get() == var ||
             g.roots[0]->input(1).get() == var))
            return -1; // a matmul writes in place only the value its sum post-op adds to
        for (const auto& q : g.epilogue)
            if (q.kind != PostOp::Kind::Sum && q.operand.get() == var)
                return -1; // read by another post-op
        if (var->shape() != g.result(root)->shape())
            return -1;
        return vs->second;
    }
    return -1;
}

} // namespace

std::vector<int> last_readers(const ExecPlan& plan) {
    std::vector<int> last(plan.slots.size(), -1);
    for (size_t si = 0; si < plan.steps.size(); ++si)
        for (int s : plan.steps[si].in_slots)
            last[size_t(s)] = int(si);
    return last;
}

std::vector<bool> kept_slots(const ExecPlan& plan) {
    std::vector<bool> keep(plan.slots.size(), false);
    for (int s : plan.output_slots)
        keep[size_t(s)] = true;
    for (int s : plan.update_slots)
        keep[size_t(s)] = true;
    return keep;
}

void plan_memory(ExecPlan& plan) {
    size_t n = plan.steps.size();
    const std::vector<int> last = last_readers(plan);
    const std::vector<bool> keep = kept_slots(plan);
    const UpdateIndex ix = index_updates(plan);
    // may a later step throw? then no in-place writes
    std::vector<bool> throws_after(n + 1, plan.options.nan_guard);
    bool fallback_after = plan.options.nan_guard;
    for (size_t si = n; si-- > 0;) {
        fallback_after = fallback_after || plan.steps[si].kind == StepKind::Fallback;
        throws_after[si] = fallback_after;
    }
    for (size_t si = 0; si < n; ++si) {
        Step& s = plan.steps[si];
        s.inplace_var.assign(s.out_slots.size(), -1);
        if ((s.kind == StepKind::Kernel || s.kind == StepKind::Dot) &&
            plan.options.inplace_updates && !throws_after[si])
            for (size_t k = 0; k < s.out_slots.size(); ++k)
                s.inplace_var[k] = inplace_candidate(plan, ix, s, k, si, last);
        s.free_after.clear();
        for (int x : s.in_slots)
            if (last[size_t(x)] == int(si) && !keep[size_t(x)] &&
                plan.slots[size_t(x)].source == SlotSource::Step &&
                std::find(s.free_after.begin(), s.free_after.end(), x) == s.free_after.end())
                s.free_after.push_back(x);
        s.donor = plan.options.inplace_updates ? donors(plan, s, keep)
                                               : std::vector<int>(s.out_slots.size(), -1);
    }
}

SharedBuffers share_buffers(const ExecPlan& plan, const std::vector<TensorType>& types) {
    const size_t ns = plan.slots.size();
    SharedBuffers out;
    std::vector<int>& entry = out.entry;
    entry.resize(ns);
    std::iota(entry.begin(), entry.end(), 0);
    auto slot = [&](const NodePtr& n) { return plan.slot_of.at(n.get()); };
    std::vector<int> root(ns), dies(ns, -1);
    std::iota(root.begin(), root.end(), 0);
    std::vector<char> produced(ns, 0), freed(ns, 0), keep(ns, 0), in_place(ns, 0);
    for (size_t si = 0; si < plan.steps.size(); ++si) {
        const Step& st = plan.steps[si];
        const Group& g = plan.group(st);
        const PostOp* sum = st.kind == StepKind::View ? nullptr : sum_post_op(g.epilogue);
        const int acc = sum ? slot(sum->operand) : -1;
        if (st.kind == StepKind::View) {
            root[size_t(st.out_slots[0])] = root[size_t(slot(g.roots[0]->input(0)))];
        } else if (acc >= 0 && std::find(st.free_after.begin(), st.free_after.end(), acc) !=
                                   st.free_after.end()) {
            // the call may write its result into the value it adds to (the cpu runner's
            // accumulator()): the result is that buffer, like a view
            root[size_t(st.out_slots[0])] = root[size_t(acc)];
        } else {
            for (size_t k = 0; k < st.out_slots.size(); ++k) {
                if (!st.donor.empty() && st.donor[k] >= 0) {
                    // in its donor's buffer, like a view of it (Note [Kernel outputs in dying
                    // inputs' buffers])
                    root[size_t(st.out_slots[k])] = root[size_t(st.donor[k])];
                    continue;
                }
                produced[size_t(st.out_slots[k])] = 1;
                if (!st.inplace_var.empty() && st.inplace_var[k] >= 0)
                    keep[size_t(st.out_slots[k])] = in_place[size_t(st.out_slots[k])] = 1;
            }
            // an all_reduce may read its operands after its step (Note [Collective overlap])
            if (g.roots[0]->is(Op::AllReduce))
                for (int in : st.in_slots)
                    keep[size_t(root[size_t(in)])] = 1;
        }
        for (int sl : st.free_after) {
            freed[size_t(sl)] = 1;
            dies[size_t(root[size_t(sl)])] = int(si);
        }
    }
    // a buffer is shared only when every view of it dies in the call
    for (size_t sl = 0; sl < ns; ++sl)
        if (plan.slots[sl].source == SlotSource::Step && !freed[sl])
            keep[size_t(root[sl])] = 1;
    auto shares = [&](int sl) {
        return produced[size_t(sl)] && root[size_t(sl)] == sl && !keep[size_t(sl)] &&
               dies[size_t(sl)] >= 0;
    };
    // per type, the dead slots whose entries may be taken, the most recently dead last (a map,
    // not a scan of every dead slot: plans of tens of thousands of steps)
    std::map<std::pair<DType, Shape>, std::vector<int>> free_slots;
    auto type_of = [&](int sl) {
        const TensorType& t = types[size_t(sl)];
        return std::make_pair(t.dtype, t.shape);
    };
    std::vector<std::vector<int>> dying(plan.steps.size());
    for (size_t sl = 0; sl < ns; ++sl)
        if (shares(int(sl)))
            dying[size_t(dies[sl])].push_back(int(sl));
    for (size_t si = 0; si < plan.steps.size(); ++si) {
        for (int o : plan.steps[si].out_slots) {
            if (!shares(o))
                continue;
            auto it = free_slots.find(type_of(o));
            if (it != free_slots.end() && !it->second.empty()) {
                entry[size_t(o)] = entry[size_t(it->second.back())];
                it->second.pop_back();
            }
        }
        for (int d : dying[si])
            free_slots[type_of(d)].push_back(d);
    }
    for (size_t sl = 0; sl < ns; ++sl)
        if (produced[sl] && !in_place[sl] && entry[sl] == int(sl)) // (a variable's buffer)
            out.bytes += numel(types[sl].shape) * int64_t(dtype_size(types[sl].dtype));
    return out;
}

} // namespace sj::compiler
