// Pass: the memory plan. Decides, once per function, when each buffer dies and which updates are
// written into their variable's own buffer.
#include "ExecPlan.h"

#include <symjax/ir/Node.h>

#include "../core/NodeMap.h"

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

namespace {

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
        for (const auto& l : g.loads)
            if (l.buffer.get() == var && l.chain != 0)
                return -1; // read elsewhere than written
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
    }
}

} // namespace sj::compiler
