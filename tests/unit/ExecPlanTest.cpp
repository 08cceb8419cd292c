// The compiler's execution plan (src/compiler/ExecPlan.h): slots, steps, the memory plan's
// lifetimes and in-place updates, binding shapes per call, the targets fusion asks, and the
// backend registry.
#include "TestUtil.h"

#include <gtest/gtest.h>
#include <symjax/ir/Node.h>
#include <symjax/nn.h>
#include <symjax/symjax.h>

#include "backend/Backend.h"
#include "backend/cpu/CpuTarget.h"
#include "compiler/ExecPlan.h"

#include <algorithm>
#include <set>

using namespace sj;
namespace cc = sj::compiler;
using sj::test::expect_close;
using sj::test::on;
using sj::test::random_array;

namespace {

/// One SGD step of a two-layer MLP: loss as output, every parameter updated.
struct Mlp {
    Placeholder x{{-1, 8}, f32, "x"};
    Placeholder y{{-1}, i64, "y"};
    Variable w1{random_array(f32, {8, 16}, 1), "w1"}, b1{Array(f32, {16}), "b1"};
    Variable w2{random_array(f32, {16, 4}, 2), "w2"}, b2{Array(f32, {4}), "b2"};
    Tensor loss;
    detail::Program program;
    Mlp() {
        Tensor h = nn::relu(matmul(x, w1) + b1);
        loss = mean(nn::losses::sparse_softmax_crossentropy_logits(y, matmul(h, w2) + b2));
        std::vector<Variable> vs{w1, b1, w2, b2};
        std::vector<Tensor> ts(vs.begin(), vs.end());
        auto g = gradients(loss, ts);
        program.inputs = {x.node(), y.node()};
        program.outputs = {loss.node()};
        for (size_t i = 0; i < vs.size(); ++i) {
            program.variables.push_back(vs[i].node());
            program.updates.push_back({i, (vs[i] - 0.1 * g[i]).node()});
        }
    }
};

/// Replays the plan's steps and checks that every slot a step reads is defined then (a leaf, or
/// computed by an earlier step and not freed yet), and that every computed slot is freed once,
/// after its last reader, unless it is an output or an update's value.
void check_lifetimes(const cc::ExecPlan& plan) {
    std::vector<int> state(plan.slots.size(), 0); // 0 undefined, 1 live, 2 freed
    for (size_t s = 0; s < plan.slots.size(); ++s)
        if (plan.slots[s].source != cc::SlotSource::Step)
            state[s] = 1;
    std::vector<int> last(plan.slots.size(), -1);
    for (size_t k = 0; k < plan.steps.size(); ++k)
        for (int s : plan.steps[k].in_slots)
            last[size_t(s)] = int(k);
    std::set<int> kept(plan.output_slots.begin(), plan.output_slots.end());
    kept.insert(plan.update_slots.begin(), plan.update_slots.end());
    for (size_t k = 0; k < plan.steps.size(); ++k) {
        const cc::Step& st = plan.steps[k];
        for (int s : st.in_slots)
            ASSERT_EQ(state[size_t(s)], 1) << "step " << k << " reads %" << s << "\n" << plan.str();
        for (int s : st.out_slots)
            state[size_t(s)] = 1;
        for (int s : st.free_after) {
            EXPECT_EQ(last[size_t(s)], int(k)) << "%" << s << " freed before its last reader";
            EXPECT_FALSE(kept.count(s)) << "%" << s << " is an output or an update's value";
            EXPECT_EQ(plan.slots[size_t(s)].source, cc::SlotSource::Step) << "a leaf was freed";
            state[size_t(s)] = 2;
        }
    }
    for (size_t s = 0; s < plan.slots.size(); ++s)
        if (plan.slots[s].source == cc::SlotSource::Step && !kept.count(int(s)) && last[s] >= 0)
            EXPECT_EQ(state[s], 2) << "%" << s << " is never freed";
    for (int s : plan.output_slots)
        EXPECT_EQ(state[size_t(s)], 1);
    for (int s : plan.update_slots)
        EXPECT_EQ(state[size_t(s)], 1);
}

size_t inplace_count(const cc::ExecPlan& plan) {
    size_t n = 0;
    for (const auto& st : plan.steps)
        for (int v : st.inplace_var)
            n += v >= 0;
    return n;
}

} // namespace

TEST(ExecPlan, SlotsStepsAndLifetimes) {
    Mlp m;
    cc::ExecPlan plan = cc::compile(m.program, cpu::cpu_target());
    EXPECT_EQ(plan.target->name(), "cpu");
    ASSERT_EQ(plan.output_slots.size(), 1u);
    ASSERT_EQ(plan.update_slots.size(), 4u);
    // the inputs and the variables are slots of their own kind
    size_t inputs = 0, vars = 0;
    for (const auto& s : plan.slots) {
        inputs += s.source == cc::SlotSource::Input;
        vars += s.source == cc::SlotSource::Variable;
    }
    EXPECT_EQ(inputs, 2u);
    EXPECT_EQ(vars, 4u);
    size_t dots = 0;
    for (const auto& st : plan.steps)
        dots += st.kind == cc::StepKind::Dot;
    EXPECT_GE(dots, 4u) << plan.str(); // two forward matmuls and their gradients
    check_lifetimes(plan);
}

TEST(ExecPlan, InPlaceUpdatesOnlyWhenNothingCanThrowAfter) {
    Mlp m;
    cc::ExecPlan plan = cc::compile(m.program, cpu::cpu_target());
    // the bias updates are elementwise kernels reading their variable where they write it
    EXPECT_GE(inplace_count(plan), 2u) << plan.str();
    EXPECT_NE(plan.str().find("in place of"), std::string::npos);
    for (const auto& st : plan.steps)
        for (size_t k = 0; k < st.inplace_var.size(); ++k)
            if (st.inplace_var[k] >= 0) {
                EXPECT_EQ(st.kind, cc::StepKind::Kernel);
                EXPECT_EQ(plan.slots[size_t(st.inplace_var[k])].source, cc::SlotSource::Variable);
            }
    EXPECT_EQ(inplace_count(cc::compile(m.program, cpu::cpu_target(), {false, false})), 0u);
    // the NaN guard may throw after any step: a throwing call must leave every variable intact
    EXPECT_EQ(inplace_count(cc::compile(m.program, cpu::cpu_target(), {true, true})), 0u);
}

// Note [Kernel outputs in dying inputs' buffers]: a kernel's stored output takes the buffer of an
// input of its type that dies at the step, when the kernel reads it only where it writes and the
// stored value depends on it; not when it is read through a permute, kept as an output, or feeds
// only a reduction. Values against the reference interpreter, written in place or not.
TEST(ExecPlan, KernelOutputsTakeTheBuffersOfInputsDyingAtTheirStep) {
    Placeholder x({16, 16}, f32, "x");
    Variable w(random_array(f32, {16, 16}, 5), "w");
    Tensor h = matmul(x, w);                   // a library call's value
    Tensor pointwise = exp(h * 0.1) + h;       // reads h where it writes: h's buffer
    Tensor permuted = exp(transpose(h * 0.1)); // reads h elsewhere than it writes
    struct Case {
        const char* name;
        std::vector<Tensor> outputs;
        bool donor;
    };
    const std::vector<Case> cases = {
        {"pointwise", {matmul(pointwise, w)}, true},
        {"permuted", {matmul(permuted, w)}, false},
        {"h kept as an output", {matmul(pointwise, w), h}, false},
        {"only a reduction reads h", {matmul(exp(x * 0.5), w) + sum(h)}, false},
    };
    for (const Case& c : cases) {
        detail::Program program;
        program.inputs = {x.node()};
        program.variables = {w.node()};
        for (const Tensor& t : c.outputs)
            program.outputs.push_back(t.node());
        cc::ExecPlan plan = cc::compile(program, cpu::cpu_target());
        const int hs = plan.slot_of.count(h.node().get()) ? plan.slot_of.at(h.node().get()) : -1;
        bool donated = false;
        for (const auto& st : plan.steps)
            for (size_t k = 0; k < st.donor.size(); ++k)
                if (st.donor[k] >= 0) {
                    EXPECT_EQ(st.kind, cc::StepKind::Kernel) << c.name;
                    donated |= st.donor[k] == hs;
                }
        EXPECT_EQ(donated, c.donor) << c.name << "\n" << plan.str();
        EXPECT_EQ(plan.str().find("'s buffer") != std::string::npos, c.donor) << c.name;
        // without in-place writes, no donors either
        for (const auto& st : cc::compile(program, cpu::cpu_target(), {false, false}).steps)
            for (int d : st.donor)
                EXPECT_LT(d, 0) << c.name;
        Array xv = random_array(f32, {16, 16}, 6);
        std::vector<Array> want = function({x}, c.outputs, {}, on("reference"))(xv);
        Function f = function({x}, c.outputs, {}, on("cpu"));
        for (int call = 0; call < 2; ++call) { // the second call: buffers from the pool
            std::vector<Array> got = f(xv);
            for (size_t i = 0; i < want.size(); ++i)
                expect_close(got[i], want[i], 1e-5, 1e-5, c.name);
        }
    }
}

// Note [Kernel outputs in dying inputs' buffers], library calls: the cpu target's max-pool
// backward writes dx into the buffer of the pool's input when that input dies at the call (the
// plan dump says so), not when a later step still reads the input (here the gradient of
// sum(c * c), added after). The linear loss needs no forward pool, so the backward makes the
// workspace from c itself before writing over it. Values against the reference interpreter
// over two calls (the second with buffers from the pool).
TEST(ExecPlan, MaxPoolBackwardWritesIntoItsDyingInput) {
    Placeholder x({2, 16, 8, 8}, f32, "x");
    Variable w(random_array(f32, {16, 16, 3, 3}, 8), "w");
    Tensor c = conv2d(x, w, {}, "SAME");
    Tensor pooled = sum(tanh(max_pool2d(c, {2, 2})));
    for (int variant = 0; variant < 3; ++variant) {
        const bool c_read_after = variant == 1;
        Tensor loss = variant == 0   ? pooled
                      : variant == 1 ? pooled + sum(c * c)
                                     : sum(max_pool2d(c, {2, 2}) * 0.5);
        std::vector<Tensor> outs = gradients(loss, {x, w});
        detail::Program program;
        program.inputs = {x.node()};
        program.variables = {w.node()};
        for (const Tensor& t : outs)
            program.outputs.push_back(t.node());
        cc::ExecPlan plan = cc::compile(program, cpu::cpu_target());
        check_lifetimes(plan);
        int pools = 0, donated = 0;
        for (const auto& st : plan.steps) {
            const Node* r = plan.group(st).roots[0].get();
            EXPECT_FALSE(variant == 2 && r->is(Op::Pool)) << plan.str(); // (no forward to pair)
            if (!r->is(Op::MaxPoolBackward))
                continue;
            ++pools;
            ASSERT_EQ(st.kind, cc::StepKind::Window) << plan.str();
            if (st.donor[0] >= 0) {
                EXPECT_EQ(st.donor[0], plan.slot_of.at(r->input(0).get())) << plan.str();
                ++donated;
            }
        }
        ASSERT_EQ(pools, 1) << plan.str();
        EXPECT_EQ(donated, c_read_after ? 0 : 1) << plan.str();
        // the generic target (no library calls) names no such donor
        for (const auto& st : cc::compile(program, cc::generic_target()).steps)
            if (st.kind != cc::StepKind::Kernel)
                for (int d : st.donor)
                    EXPECT_LT(d, 0);
        Array xv = random_array(f32, {2, 16, 8, 8}, 9);
        const char* what = variant == 0 ? "c dies" : variant == 1 ? "c read after" : "linear";
        std::vector<Array> want = function({x}, outs, {}, on("reference"))(xv);
        Function f = function({x}, outs, {}, on("cpu"));
        for (int call = 0; call < 2; ++call) {
            std::vector<Array> got = f(xv);
            for (size_t i = 0; i < want.size(); ++i)
                expect_close(got[i], want[i], 1e-4, 1e-4, what);
        }
    }
}

// Note [Accumulating post-op]: SGD momentum's v' = 0.9 v + dW is the weight gradient matmul's
// sum post-op, written into v's own buffer; w' = w - 0.01 v' is a kernel in place of w after it
TEST(ExecPlan, MatmulAccumulatesIntoItsVariableInPlace) {
    Placeholder x({6, 8}, f32, "x");
    Variable w(random_array(f32, {8, 4}, 3), "w"), v(random_array(f32, {8, 4}, 4), "v");
    Tensor g = gradients(sum(tanh(matmul(x, w))), {w})[0];
    Tensor v2 = v * 0.9 + g;
    detail::Program program;
    program.inputs = {x.node()};
    program.variables = {v.node(), w.node()};
    program.updates = {{0, v2.node()}, {1, (w - 0.01 * v2).node()}};
    cc::ExecPlan plan = cc::compile(program, cpu::cpu_target());
    const int vs = plan.slot_of.at(v.node().get()), ws = plan.slot_of.at(w.node().get());
    bool dot_into_v = false, kernel_into_w = false;
    for (const auto& st : plan.steps)
        for (int var : st.inplace_var) {
            dot_into_v |= st.kind == cc::StepKind::Dot && var == vs;
            kernel_into_w |= st.kind == cc::StepKind::Kernel && var == ws;
        }
    EXPECT_TRUE(dot_into_v) << plan.str();
    EXPECT_TRUE(kernel_into_w) << plan.str();
    check_lifetimes(plan);
    // without in-place updates the matmul still accumulates, into a copy
    EXPECT_EQ(inplace_count(cc::compile(program, cpu::cpu_target(), {false, false})), 0u);
}

// Note [Updates after their variable's readers]: w2 is read by the forward matmul, by the data
// gradient's matmul and by its own update; the update waits for the other readers and is
// written into w2's buffer (it used to run before the data gradient, into a new buffer). Where
// a reader of the old value depends on the new one, no edge is added and the update is not in
// place. Values against the reference interpreter over two calls.
TEST(ExecPlan, UpdatesRunAfterTheOtherReadersOfTheirVariable) {
    Mlp m;
    cc::ExecPlan plan = cc::compile(m.program, cpu::cpu_target());
    check_lifetimes(plan);
    for (const Variable* w : {&m.w1, &m.w2}) {
        const int ws = plan.slot_of.at(w->node().get());
        int last_reader = -1, writer = -1;
        for (size_t k = 0; k < plan.steps.size(); ++k) {
            const cc::Step& st = plan.steps[k];
            if (std::find(st.inplace_var.begin(), st.inplace_var.end(), ws) != st.inplace_var.end())
                writer = int(k);
            else if (std::find(st.in_slots.begin(), st.in_slots.end(), ws) != st.in_slots.end())
                last_reader = int(k);
        }
        ASSERT_GE(writer, 0) << w->name() << " is not updated in place\n" << plan.str();
        EXPECT_LT(last_reader, writer) << plan.str();
    }
    // a matmul of w2's old value by its new one: the update cannot wait for it (it would wait
    // for itself), and w2's buffer is still read after it
    Tensor w2_new = m.w2 - 0.1 * gradients(m.loss, {m.w2})[0];
    detail::Program p2 = m.program;
    p2.outputs.push_back(matmul(transpose(m.w2), w2_new).node());
    cc::ExecPlan plan2 = cc::compile(p2, cpu::cpu_target());
    check_lifetimes(plan2);
    const int w2s = plan2.slot_of.at(m.w2.node().get());
    for (const auto& st : plan2.steps)
        for (int v : st.inplace_var)
            EXPECT_NE(v, w2s) << plan2.str();
    // the values: the same updates as the reference interpreter's, call after call
    Array xv = random_array(f32, {5, 8}, 7);
    Array yv(i64, {5});
    for (int64_t i = 0; i < 5; ++i)
        yv.data<int64_t>()[i] = i % 4;
    Mlp r; // the same initial values (the same seeds)
    std::vector<Variable> mv{m.w1, m.b1, m.w2, m.b2}, rv{r.w1, r.b1, r.w2, r.b2};
    auto updates_of = [](const Mlp& n, const std::vector<Variable>& vs) {
        Updates u;
        auto g = gradients(n.loss, std::vector<Tensor>(vs.begin(), vs.end()));
        for (size_t i = 0; i < vs.size(); ++i)
            u.add(vs[i], vs[i] - 0.1 * g[i]);
        return u;
    };
    Function f = function({m.x, m.y}, {m.loss}, updates_of(m, mv), on("cpu"));
    Function want = function({r.x, r.y}, {r.loss}, updates_of(r, rv), on("reference"));
    for (int call = 0; call < 2; ++call) {
        expect_close(f(xv, yv)[0], want(xv, yv)[0], 1e-5, 1e-5, "loss");
        for (size_t i = 0; i < mv.size(); ++i)
            expect_close(mv[i].value(), rv[i].value(), 1e-5, 1e-5, mv[i].name());
    }
}

// Note [Collective overlap]: with each gradient averaged by an all_reduce, every step that
// reads an average runs after every step that does not, so the last layer's all_reduce is
// posted before the first layer's gradient is computed (a world of one process: the plan is the
// same at any size).
TEST(ExecPlan, CollectivesArePostedBeforeTheRestOfTheBackwardPass) {
    Mlp m;
    std::vector<Variable> vs{m.w1, m.b1, m.w2, m.b2};
    std::vector<Tensor> ts(vs.begin(), vs.end());
    auto g = gradients(m.loss, ts);
    for (size_t i = 0; i < vs.size(); ++i)
        m.program.updates[i] = {
            i, (vs[i] - 0.1 * dist::all_reduce(g[i], dist::ReduceOp::Mean)).node()};
    cc::ExecPlan plan = cc::compile(m.program, cpu::cpu_target());
    check_lifetimes(plan);
    std::vector<char> averaged(plan.slots.size(), 0);
    int first_late = -1, all_reduce_w2 = -1, grad_w1 = -1;
    for (size_t k = 0; k < plan.steps.size(); ++k) {
        const cc::Step& st = plan.steps[k];
        const Node* r = plan.group(st).roots[0].get();
        bool reads = false;
        for (int s : st.in_slots)
            reads |= averaged[size_t(s)] != 0;
        if (reads || r->is(Op::AllReduce))
            for (int s : st.out_slots)
                averaged[size_t(s)] = 1;
        if (reads && first_late < 0)
            first_late = int(k);
        EXPECT_TRUE(reads || first_late < 0)
            << "step " << k << " does not read an average but runs after one that does\n"
            << plan.str();
        // (the compiler rewrote the graph: the values are known by their shapes here)
        if (r->is(Op::AllReduce) && r->shape() == Shape{16, 4})
            all_reduce_w2 = int(k);
        if (st.kind == cc::StepKind::Dot && r->shape() == Shape{8, 16})
            grad_w1 = int(k);
    }
    ASSERT_GE(all_reduce_w2, 0) << plan.str();
    ASSERT_GE(grad_w1, 0) << plan.str();
    EXPECT_LT(all_reduce_w2, grad_w1) << "w2's all_reduce waits for w1's gradient\n" << plan.str();
}

TEST(ExecPlan, BindIsPerShapeAndChecksBeforeAnythingRuns) {
    Mlp m;
    cc::ExecPlan plan = cc::compile(m.program, cpu::cpu_target());
    cc::BoundPlan b32 = cc::bind(plan, {{f32, {32, 8}}, {i64, {32}}});
    cc::BoundPlan b5 = cc::bind(plan, {{f32, {5, 8}}, {i64, {5}}});
    EXPECT_EQ(b32.types[size_t(plan.slot_of.at(m.x.node().get()))].shape, Shape({32, 8}));
    EXPECT_EQ(b5.types[size_t(plan.slot_of.at(m.x.node().get()))].shape, Shape({5, 8}));
    EXPECT_GT(b32.intermediate_bytes, b5.intermediate_bytes);
    EXPECT_GT(b32.peak_bytes, 0);
    EXPECT_LE(b32.peak_bytes, b32.intermediate_bytes);
    for (size_t k = 0; k < plan.steps.size(); ++k)
        if (plan.steps[k].kind == cc::StepKind::Kernel)
            EXPECT_GT(b32.steps[k].launch.points, 0);
    // a batch of 32 rows with 31 labels: the op that sees the clash is named, as an InputError
    std::string msg = test::message_of<InputError>([&] {
        cc::bind(plan, {{f32, {32, 8}}, {i64, {31}}});
    });
    EXPECT_CONTAINS(msg, "one_hot(check_index(y))");
    EXPECT_CONTAINS(msg, "[31, 4] and [32, 4] do not broadcast");
}

// Note [Steps follow their inputs]: in an SGD step of a two-layer MLP whose variables are listed
// first layer first, the last layer's weight gradient and update run as soon as the logits'
// gradient exists, before the backward pass reaches the first layer's weight gradient (the
// fusion order, a walk from the updates in the variables' order, ran them the other way round).
TEST(ExecPlan, WeightGradientsRunAsSoonAsTheirInputsExist) {
    Mlp m;
    cc::ExecPlan plan = cc::compile(m.program, cpu::cpu_target());
    check_lifetimes(plan);
    auto step_of = [&](int slot) {
        for (size_t k = 0; k < plan.steps.size(); ++k)
            for (int s : plan.steps[k].out_slots)
                if (s == slot)
                    return int(k);
        return -1;
    };
    // a variable's weight gradient: the matmul its update reads (or is, with a sum post-op)
    auto weight_gradient = [&](size_t update) {
        const int u = step_of(plan.update_slots[update]);
        if (plan.steps[size_t(u)].kind == cc::StepKind::Dot)
            return u;
        for (int s : plan.steps[size_t(u)].in_slots)
            if (int k = step_of(s); k >= 0 && plan.steps[size_t(k)].kind == cc::StepKind::Dot)
                return k;
        return -1;
    };
    const int dw1 = weight_gradient(0), dw2 = weight_gradient(2);
    const int w2_updated = step_of(plan.update_slots[2]);
    ASSERT_GE(dw1, 0) << plan.str();
    ASSERT_GE(dw2, 0) << plan.str();
    EXPECT_LT(dw2, dw1) << plan.str();
    EXPECT_LT(w2_updated, dw1) << plan.str();
}

// Note [Buffers shared by lifetime]: per bound call, a value may take the buffer of an earlier
// value of the same type that is dead by then. Checked on the plan alone: the values sharing a
// buffer have one type and lifetimes that do not overlap, outputs and updates keep their own,
// and a chain of eight [B, 32] layers needs fewer buffers than values, at each batch size.
TEST(ExecPlan, SharedBuffersHoldValuesOfOneTypeWhoseLifetimesDoNotOverlap) {
    Placeholder x({-1, 32}, f32, "x");
    std::vector<Variable> w;
    for (uint64_t i = 0; i < 8; ++i)
        w.emplace_back(random_array(f32, {32, 32}, 90 + i), "w" + std::to_string(i));
    Tensor h = x;
    for (const auto& wi : w)
        h = tanh(matmul(h, wi));
    std::vector<Tensor> ws(w.begin(), w.end());
    auto g = gradients(sum(h), ws);
    detail::Program program;
    program.inputs = {x.node()};
    program.outputs = {h.node()};
    for (size_t i = 0; i < w.size(); ++i) {
        program.variables.push_back(w[i].node());
        program.updates.push_back({i, (w[i] - 0.1 * g[i]).node()});
    }
    cc::ExecPlan plan = cc::compile(program, cpu::cpu_target());
    check_lifetimes(plan);
    for (int64_t batch : {16, 3}) {
        cc::BoundPlan b = cc::bind(plan, {{f32, {batch, 32}}});
        cc::SharedBuffers sb = cc::share_buffers(plan, b.types);
        ASSERT_EQ(sb.entry.size(), plan.slots.size());
        // each computed slot's lifetime: [its step, the step that frees it] (never freed: the
        // whole call)
        const int end = int(plan.steps.size());
        std::vector<int> def(plan.slots.size(), -1), death(plan.slots.size(), end);
        for (size_t k = 0; k < plan.steps.size(); ++k) {
            for (int sl : plan.steps[k].out_slots)
                def[size_t(sl)] = int(k);
            for (int sl : plan.steps[k].free_after)
                death[size_t(sl)] = int(k);
        }
        std::set<int> kept(plan.output_slots.begin(), plan.output_slots.end());
        kept.insert(plan.update_slots.begin(), plan.update_slots.end());
        int64_t all_bytes = 0;
        size_t shared = 0;
        for (size_t sl = 0; sl < plan.slots.size(); ++sl) {
            const int e = sb.entry[sl];
            if (plan.slots[sl].source == cc::SlotSource::Step && def[sl] >= 0 &&
                plan.steps[size_t(def[sl])].kind != cc::StepKind::View)
                all_bytes += numel(b.types[sl].shape) * int64_t(dtype_size(b.types[sl].dtype));
            if (e == int(sl))
                continue;
            ++shared;
            EXPECT_FALSE(kept.count(int(sl))) << "%" << sl << " is kept, yet shares %" << e;
            EXPECT_EQ(b.types[sl], b.types[size_t(e)]) << "%" << sl << " and %" << e;
            EXPECT_EQ(sb.entry[size_t(e)], e) << "an entry is a slot's own";
        }
        // every two slots of one entry: one dies before the other is written
        for (size_t a = 0; a < plan.slots.size(); ++a)
            for (size_t c = a + 1; c < plan.slots.size(); ++c)
                if (sb.entry[a] == sb.entry[c] && def[a] >= 0 && def[c] >= 0)
                    EXPECT_TRUE(death[a] < def[c] || death[c] < def[a])
                        << "%" << a << " [" << def[a] << ", " << death[a] << "] and %" << c << " ["
                        << def[c] << ", " << death[c] << "] share a buffer\n"
                        << plan.str();
        EXPECT_GT(shared, 4u) << plan.str();
        EXPECT_LT(sb.bytes, all_bytes);
    }
}

TEST(Target, GenericTargetHasNoLibraryCallsAndNoLowering) {
    Placeholder x({2, 16, 8, 8}, f32, "x");
    Variable w(random_array(f32, {16, 16, 3, 3}, 3), "w");
    Tensor y = nn::relu(conv2d(x, w, {1, 1}, "SAME"));
    Tensor z = matmul(reshape(y, {2, -1}), ones({16 * 64, 4}, f32));
    detail::Program p;
    p.inputs = {x.node()};
    p.outputs = {y.node(), z.node()};
    p.variables = {w.node()};
    cc::ExecPlan generic = cc::compile(p, cc::generic_target());
    for (const auto& st : generic.steps) {
        EXPECT_NE(st.kind, cc::StepKind::Dot) << generic.str();
        EXPECT_NE(st.kind, cc::StepKind::Window) << generic.str();
        EXPECT_TRUE(generic.group(st).epilogue.empty());
    }
    cc::ExecPlan cpu = cc::compile(p, cpu::cpu_target());
    size_t windows = 0, dots = 0, post_ops = 0;
    for (const auto& st : cpu.steps) {
        windows += st.kind == cc::StepKind::Window;
        dots += st.kind == cc::StepKind::Dot;
        post_ops += cpu.group(st).epilogue.size();
    }
    EXPECT_GE(windows, 1u) << cpu.str();
    EXPECT_EQ(dots, 1u) << cpu.str();
    EXPECT_GE(post_ops, 1u) << cpu.str(); // the relu rides on the convolution
    // the cpu target's lowering blocks the conv's channels (16 of them: one whole block)
    bool blocked = false;
    for (const Node* n : topo_order({cpu.compiled.roots[0].get()}))
        blocked |= n->is(Op::BlockChannels) || n->is(Op::UnblockChannels);
    EXPECT_EQ(blocked, cpu::blocked_layout());
}

namespace {
int g_counting_calls = 0;
/// A backend of the test's own: the reference interpreter, counting how often it compiles.
std::unique_ptr<detail::Executable> counting_backend(const detail::Program& p,
                                                     const FunctionOptions& o) {
    ++g_counting_calls;
    return detail::find_backend("reference")(p, o);
}
} // namespace

TEST(BackendRegistry, BackendsRegisterThemselvesAndOthersCanJoin) {
    auto names = available_backends();
    EXPECT_NE(std::find(names.begin(), names.end(), "cpu"), names.end());
    EXPECT_NE(std::find(names.begin(), names.end(), "reference"), names.end());
    detail::register_backend("test_counting", counting_backend);
    names = available_backends();
    EXPECT_NE(std::find(names.begin(), names.end(), "test_counting"), names.end());
    Placeholder x({3}, f64, "x");
    FunctionOptions o;
    o.backend = "test_counting";
    Function f = function({x}, {x * 2.0}, {}, o);
    EXPECT_EQ(g_counting_calls, 1);
    expect_close(f(Array(std::vector<double>{1, 2, 3}))[0], Array(std::vector<double>{2, 4, 6}), 0,
                 0, "2x");
    o.backend = "no_such_backend";
    std::string m = test::message_of<Error>([&] { function({x}, {x * 2.0}, {}, o); });
    EXPECT_CONTAINS(m, "unknown backend 'no_such_backend'");
    EXPECT_CONTAINS(m, "test_counting");
}

TEST(ExecPlan, VerifierRejectsBrokenPlans) {
    Mlp m;
    cc::ExecPlan plan = cc::compile(m.program, cpu::cpu_target());
    EXPECT_NO_THROW(cc::verify_plan(plan));
    // a value freed before its last reader
    {
        cc::ExecPlan bad = plan;
        const cc::Step& last = bad.steps.back();
        int s = -1;
        for (int x : last.in_slots)
            if (bad.slots[size_t(x)].source == cc::SlotSource::Step)
                s = x;
        ASSERT_GE(s, 0) << plan.str();
        size_t producer = 0;
        for (size_t k = 0; k < bad.steps.size(); ++k)
            for (int o : bad.steps[k].out_slots)
                if (o == s)
                    producer = k;
        bad.steps[producer].free_after.push_back(s);
        EXPECT_THROW(cc::verify_plan(bad), InternalError);
    }
    // steps out of order: a step reads what a later one computes
    {
        cc::ExecPlan bad = plan;
        std::swap(bad.steps.front(), bad.steps.back());
        EXPECT_THROW(cc::verify_plan(bad), InternalError);
    }
    // an in-place write into an input's buffer
    {
        cc::ExecPlan bad = plan;
        int input = -1;
        for (size_t s = 0; s < bad.slots.size(); ++s)
            if (bad.slots[s].source == cc::SlotSource::Input)
                input = int(s);
        for (auto& st : bad.steps)
            if (st.kind == cc::StepKind::Kernel) {
                st.inplace_var.assign(st.out_slots.size(), -1);
                st.inplace_var[0] = input;
                break;
            }
        EXPECT_THROW(cc::verify_plan(bad), InternalError);
    }
    // a view step whose first read is not its source (runners read the source there)
    {
        Placeholder x({4, 6}, f32, "x");
        Tensor r = reshape(exp(x), {6, 4});
        detail::Program p;
        p.inputs = {x.node()};
        p.outputs = {(log(r) + sum(r)).node()};
        cc::ExecPlan good = cc::compile(p, cpu::cpu_target());
        EXPECT_NO_THROW(cc::verify_plan(good));
        cc::ExecPlan bad = good;
        bool found = false;
        for (auto& st : bad.steps)
            if (st.kind == cc::StepKind::View) {
                st.in_slots.insert(st.in_slots.begin(), good.slot_of.at(x.node().get()));
                found = true;
            }
        ASSERT_TRUE(found) << good.str();
        EXPECT_THROW(cc::verify_plan(bad), InternalError);
    }
}
