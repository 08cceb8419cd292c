// The cpu backend's Executable: a runner of the compiler's plan (src/compiler/ExecPlan.h). It
// runs the steps (JIT kernels, GEMM, oneDNN calls, views, reference fallbacks) over the plan
// bound to each input-shape signature (Note [Plans and runners] in src/compiler/ExecPlan.cpp).
#include "../../compiler/ExecPlan.h"
#include "../../dist/Comm.h"
#include "../../ops/OpDef.h"
#include "../Backend.h"
#include "../reference/Reference.h"
#include "Conv.h"
#include "CpuTarget.h"
#include "Dnnl.h"
#include "Dot.h"
#include "Indexing.h"
#include "Jit.h"
#include "LibraryKernels.h"
#include "ThreadPool.h"

#include <symjax/Dist.h>
#include <symjax/Interrupt.h>
#include <symjax/Variable.h>
#include <symjax/ir/ControlFlow.h>
#include <symjax/ir/Node.h>
#include <symjax/ir/VariableState.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <map>
#include <memory>
#include <numeric>
#include <optional>
#include <sstream>
#include <tuple>
#include <unordered_map>
#include <unordered_set>

namespace sj::cpu {

using compiler::Group;

namespace {

// Note [Parallel work threshold]
// Starting the team for a kernel costs a few microseconds (more on a loaded machine, where a
// descheduled thread makes the whole region wait), so a small kernel runs on the calling thread
// alone. What makes a kernel worth splitting is its work, not its point count: a copy of 32K
// floats moves 256 KB in ~10 us, while 32K points of a GELU chain compute for much longer. So
// the plan gives each kernel a work figure, bytes moved plus kWorkPerOp per arithmetic op and
// point (compiler::BoundStep::work), and a kernel runs on several threads when that reaches
// parallel_work() (1 MB by default). `bench/run parallel_threshold` measures both kinds of
// kernel one- and two-threaded over sizes from 1K to 1M points; the threshold and the op weight
// are set where the two times cross (docs/performance.md). SJ_PARALLEL_WORK overrides the
// threshold (0: every kernel that can split does; a huge value: none), for that benchmark. The
// library kernels that split (split_work in ThreadPool.h) follow the same threshold. The
// decision depends on shapes only, never on the thread count, so results stay the same at any
// thread count (Note [Thread-count-independent sums]).

/// Milliseconds since t0.
double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

/// Bytes of one row (along dim 0) of a (non-empty) array.
int64_t row_bytes(const Array& a) { return a.nbytes() / a.shape()[0]; }

/// Whether a kernel step splits over the team: its work reaches the threshold and loop 0 has more
/// than one iteration to share (with a team of more than one thread).
bool splits(const compiler::BoundStep& b) {
    return b.work >= parallel_work() && b.launch.outer > 1;
}

// Note [Thread-count-independent sums]
// Results must not depend on the thread count (same build, same seed, any SJ_NUM_THREADS: the
// same bits; docs/reliability.md). A reduction whose loop 0 is reduced used to give each
// thread its own range: one thread summed everything in one pass, two threads summed halves
// and added them, so batch-norm gradients and the Adam moments behind them differed by up to
// 5e-6 between 1 and 2 threads. Now loop 0 is always cut into the same kReduceChunks ranges
// (fewer when it is shorter), each reduced into private outputs and combined in chunk order in
// double: the threads only decide who computes which chunk. Kernels below the work threshold
// run whole on one thread whatever the thread count, and kernels split over a kept loop give
// each thread whole output points, so neither depends on it either. The chunk count bounds the
// parallelism of such reductions (16 threads); its cost at one thread is a combine over 16
// partial outputs, which are small (the kept dims of a bias or batch-norm gradient).
constexpr int64_t kReduceChunks = 16;

// Note [Chunk partials stay allocated]
// The private outputs of a chunked reduction are kept by the call plan's step between calls
// (StepCode::partials), uninitialised: a kernel initialises its accumulators and stores every
// output point of its range, so nothing needs zeroing. They were allocated (and zeroed) per call,
// one aligned block per chunk and reduced output: 16 x 3 allocations for a batch-norm backward's
// sums, and their frees, cost ~7 us a kernel, as much as the reduction itself on a 16x16 map:
// in the SymJAX paper network's training step (AMD EPYC, 2 threads, `symjax_bench cnn_train
// --arch symjax --profile 1`; docs/performance.md, "Chunk partials kept between calls") the
// 16x16 layers' mean kernels took 0.028 ms before and 0.017 after, the variance 0.020 -> 0.015,
// the 8x8 layers' backward sums 0.032 -> 0.020. Same chunks, same combine order: the same bits.
// A function runs one call at a time (Function's lock), so a step's partials have one user.

// Note [Reductions split along the batch]
// A reduction that keeps an outer dim puts its kept loops first (KernelPlan.cpp): batch norm's
// statistics over a channel-blocked [N, C/16, H, W, 16] loop over the C/16 blocks, then the
// batch and the positions. Split over loop 0, thread t summed channel block t over every image.
// But the convolution (or pooling backward) that wrote the tensor just before gave each thread
// half the batch, so half of what a thread read sat in the other core's cache; on a 2-core EPYC
// the statistics kernel right after a conv ran as fast on two threads as on one. When loop 0
// has fewer than kReduceChunks trips (a few channel blocks, little to share) and a reduced loop
// follows, that loop (the batch) is cut into the fixed chunks of Note [Thread-count-independent
// sums] instead: each chunk runs the kernel over every kept point with the loop's range and the
// operands' offsets moved to its images, into private partial results combined in chunk order
// in double. Thread t takes the t-th contiguous run of chunks: the images its core wrote. The
// bits depend on the shapes alone, as before.

// Note [Interrupts between steps]
// A call polls poll_interrupt() (include/symjax/Interrupt.h) before each step and stops with
// sj::Interrupted when asked to, so Ctrl-C in Python stops a long graph between its steps, and a
// loop between its iterations (ref::run_region polls too). Stopping must leave every variable as
// it was (a call that throws changes nothing): run() returns the new values and Function commits
// them afterwards, except for a kernel that writes a variable's buffer in place. The memory plan
// allows that only when no later step can throw (Note [Memory plan]), so a call polls only before
// the first step with an in-place output; after it there is no loop and no fallback, nothing
// long. A region's bodies do not poll: the loop driver polls before each iteration, and its
// message names the loop and the iteration. A poll with no check installed is an atomic load and a
// thread-local read; with Python's check, a coarse clock read, and the check itself (the GIL taken)
// at most once per 10 ms.

/// A scan whose body is one elementwise kernel, compiled with the step loop inside it (Note
/// [Step kernels]): the kernel, and where each of its operands comes from.
struct StepKernel {
    compiler::KernelSpec spec;
    KernelFn fn = nullptr;
    std::vector<KernelHold> holds; // fn's code (Note [Unloading kernels] in Jit.cpp)
    std::vector<int64_t> params; // the body kernel's sizes and strides; the steps are set per call
    int64_t outer = 0, work = 0; // loop 0's trips; one step's work (compiler::BoundStep::work)
    enum class From : uint8_t { Slot, Sequence, Carry, Stacked, Final, History };
    struct Operand {
        From from;
        int index; // Slot: the body plan's slot; others: the sequence, carry or stacked output
    };
    std::vector<Operand> operands; // loads, then outputs
};

/// What the runner made of one step for the shapes of a call.
/// One fixed chunk of a reduction kernel (Note [Thread-count-independent sums], Note [Reductions
/// split along the batch]): its loop-0 range and, when they differ from the launch's, its
/// kernel parameters (the batch loop's size and the operands' offsets moved to its images).
struct ReduceChunk {
    std::vector<int64_t> params; // empty: the launch's
    int64_t begin = 0, end = 0;
};

// Note [Packed weights]
// oneDNN's matmul reads its weights B ([K, N], row-major) through a copy in a blocked layout that
// it makes on every call; given B already in that layout (16 x 64 blocks, the 64-column panels
// outermost: pack_rhs in Dot.cpp) the MLP's forward matmuls run 15-25% faster (x W0, 128 x 784 x
// 512: 0.29-0.31 ms against 0.35-0.41; docs/performance.md, "Packed weights"). Packing W before
// each call costs what it saves, so the function keeps the copy between calls and writes it for
// almost nothing: a training step that reads W in a matmul and computes W's new value in an
// elementwise kernel (an SGD or momentum update) runs that kernel 16 rows at a time and copies
// each piece, still in the core's L1, to the packed copy; the next call's matmuls read the copy.
// The copy is written with non-temporal stores: it is read only by the next call, and a plain
// store would first fetch each line from the other core, which read it in the forward matmul
// (that made the update 25-30% slower; streamed, it is 25-30% faster than before, since W's own
// lines are now read by no other core).
// The copy is valid while the variable's stamp is the one of the value it holds (Note [Variable
// versions] in src/runtime/Variable.cpp):
//   - at the start of a call, a stale copy (the first call; any write of the variable since by
//     assign, reset, load_variables or another function) is packed again from the value;
//   - the update kernel marks the copy as holding no value before it writes it, so after a call
//     that throws later the next call packs it again;
//   - after the commit (Executable::committed), the copy takes the new value's stamp.
// A function that reads W in matmuls and does not update it (inference, an evaluation step)
// keeps a copy too, packed on its first call and again whenever W changed since its last call.
// Only matmuls that run before the update read the copy (a later one reads the old value). The
// variable keeps its plain row-major value: users, checkpoints and the other readers (the data
// gradient, which reads W transposed) see nothing of this; the cost is one more K x N floats per
// weight and function (FunctionStats::packed_weights counts them). Tests:
// CpuBackend.PackedWeights*.
struct PackedWeight {
    detail::VariableState* state = nullptr;
    int slot = -1; // the variable's
    int64_t K = 0, N = 0;
    Array copy;           // K * N floats in the packed layout
    uint64_t holds = 0;   // the stamp of the value `copy` holds; 0: none
    bool written = false; // this call's update wrote `copy` with the value it commits
};

struct StepCode {
    KernelFn fn = nullptr; // kernel steps: the compiled code
    /// kernel steps that reduce in fixed chunks into private outputs: the chunks (made once per
    /// call plan); empty otherwise
    std::vector<ReduceChunk> chunks;
    /// their private outputs, [chunk][output] (null Arrays for the kept outputs), made with the
    /// plan, and each chunk's buffer pointers, kept between calls (Note [Chunk partials stay
    /// allocated]); the kernels write them during a call
    mutable std::vector<std::vector<Array>> partials;
    mutable std::vector<void*> chunk_bufs;
    /// window steps: oneDNN's primitive for these shapes (null: the reference kernel runs)
    std::shared_ptr<const WindowPrimitive> window;
    double flops = 0;
    /// a max pool and its backward sharing a workspace: its index in CallPlan::workspaces
    /// (Note [Max-pool workspace] in Conv.cpp); -1 otherwise
    int workspace = -1;
    /// a conv that keeps its weights between calls, folded with an inference batch norm or in
    /// Winograd's layout: them (Note [Folded weights cache] in Conv.cpp)
    mutable FoldedWeights folded;
    /// window and Dot steps: their oneDNN arguments, kept between calls (Note [Call arguments
    /// kept] in Dnnl.cpp)
    mutable KeptMemories memories;
    /// a conv whose weights are a variable's value: the variable, whose stamp tells whether the
    /// kept weights are current (Note [Folded weights cache]); null otherwise (bytes compared)
    detail::VariableState* weights_var = nullptr;
    /// Note [Packed weights]: a Dot step reading its rhs from this packed copy; a kernel step
    /// writing output `packs_out` to this copy as well, `pack_trips` trips of loop 0 at a time
    /// (16 rows), `pack_inner` elements a trip. Null otherwise.
    PackedWeight* packed_rhs = nullptr;
    PackedWeight* packs = nullptr;
    int packs_out = -1;
    int64_t pack_trips = 0, pack_inner = 0;
};

/// Buffers of earlier calls, reused when nobody else holds them (no page faults, no allocator
/// round trips on the hot path). Two per slot: a caller that keeps the last result while calling
/// again (a loop feeding a body its previous carry) ping-pongs between them. The pool counts its
/// handles per buffer, so that the in-place checks learn how many of a buffer's holders are the
/// pool without scanning every slot (that scan made a call of a plan with S slots and U updates
/// cost S * U: minutes for a 30,000-layer MLP step).
class SlotPool {
public:
    void resize(size_t slots) {
        if (first_.size() != slots) {
            first_.assign(slots, Array());
            second_.assign(slots, Array());
            held_.clear();
        }
    }
    /// How many of the pool's handles share a's buffer.
    long holds(const Array& a) const {
        if (!a.defined())
            return 0;
        auto it = held_.find(a.raw());
        return it == held_.end() ? 0 : it->second;
    }
    /// A buffer of the slot that nobody else holds, of type t; `make` makes one when neither of
    /// the slot's two does.
    template <class Make> Array take(size_t slot, const TensorType& t, Make&& make) {
        auto fits = [&](const Array& a) {
            return a.defined() && a.unique() && a.shape() == t.shape && a.dtype() == t.dtype;
        };
        Array& p = first_[slot];
        if (!fits(p) && fits(second_[slot]))
            std::swap(p, second_[slot]);
        if (!fits(p)) {
            Array fresh = make();
            set(second_[slot], release(p)); // reusable once its holder lets go
            set(p, std::move(fresh));
        }
        return p;
    }

private:
    /// Takes the entry's handle out of the pool, leaving the entry empty.
    Array release(Array& entry) {
        if (entry.defined() && --held_[entry.raw()] == 0)
            held_.erase(entry.raw());
        Array out = std::move(entry);
        entry = Array();
        return out;
    }
    void set(Array& entry, Array value) {
        release(entry);
        entry = std::move(value);
        if (entry.defined())
            ++held_[entry.raw()];
    }
    std::vector<Array> first_, second_;
    std::unordered_map<const void*, long> held_;
};

/// The plan bound to one input-shape signature, and its code.
struct CallPlan {
    compiler::BoundPlan bound;
    std::vector<StepCode> code; // per step
    std::vector<KernelHold> holds; // their kernels' code (Note [Unloading kernels] in Jit.cpp)
    /// buffers of earlier calls, reused when nobody else holds them
    mutable SlotPool pool;
    /// per slot: the pool entry its buffer comes from, a slot's own or that of an earlier slot
    /// of the same type dead before it (Note [Buffers shared by lifetime] in
    /// src/compiler/MemoryPlan.cpp)
    std::vector<int> pool_entry;
    int64_t buffer_bytes = 0; // of the entries the computed values use (FunctionStats)
    /// the workspaces paired pools write and their backwards read, kept across calls
    mutable std::vector<Array> workspaces;
    /// as a scan's body: whether its steps can run as a compiled loop (Note [Compiled scan
    /// loops]); -1 until asked
    mutable int loopable = -1;
    /// as a scan's body: its step kernel (Note [Step kernels]), made when first asked
    mutable std::optional<std::shared_ptr<const struct StepKernel>> step_kernel;
    /// the packed copies this plan's matmuls read (Note [Packed weights])
    std::vector<PackedWeight*> packed;
};

/// One step's times. The first call is kept apart: it pays for what runs once (oneDNN generating
/// a GEMM's kernel on its first call, the first touch of a buffer), which averaged into a short
/// run's ms/call made a 0.1 ms GEMM look like 0.43 ms.
struct Profile {
    struct Times {
        double ms = 0, bytes = 0, flops = 0;
    };
    Times first, rest; // rest: the calls after the first, summed
    int64_t calls = 0;
};

class CpuExecutable : public detail::Executable {
public:
    CpuExecutable(const detail::Program& p, const FunctionOptions& o) : opts_(o) {
        auto t0 = std::chrono::steady_clock::now();
        plan_ = compiler::compile(p, cpu_target(), {o.inplace_updates, o.nan_guard});
        const compiler::FusionPlan& fp = plan_.compiled.plan;
        stats_.nodes = plan_.order.size();
        stats_.kernels = fp.kernels();
        stats_.library_calls = fp.library_calls();
        stats_.post_ops = fp.post_ops();
        for (const Node* n : plan_.order)
            if (has_trait(n->op(), kRegion))
                add_region_node(*n);
        // Note [Interrupts between steps]: a call may stop before any step that could write a
        // variable's buffer in place, and at no later step.
        interruptible_steps_ = plan_.steps.size();
        for (size_t si = 0; si < plan_.steps.size(); ++si)
            for (int v : plan_.steps[si].inplace_var)
                if (v >= 0)
                    interruptible_steps_ = std::min(interruptible_steps_, si);
        compile_ms_ =
            ms_since(t0);
        if (detail::debug_level() >= 1)
            std::fprintf(stderr,
                         "[symjax] compiled graph: %zu nodes -> %zu groups (%zu kernels, %zu "
                         "library calls) in %.1f ms\n",
                         plan_.order.size(), fp.groups.size(), stats_.kernels, stats_.library_calls,
                         compile_ms_);
    }

    ~CpuExecutable() override {
        if (opts_.profile && !nested_)
            std::fprintf(stderr, "%s", profile_report().c_str());
    }

    FunctionStats stats() const override { return stats_; }

    /// Note [Packed weights]: the copies this call's updates wrote hold the committed values.
    void committed() override {
        for (auto& [slot, pw] : packed_)
            if (pw.written) {
                pw.holds = pw.state->current_version();
                pw.written = false;
            }
    }
    std::string dump() const override { return plan_.compiled.plan.str(); }

    std::string profile_report() const override {
        std::ostringstream os;
        os << "[symjax] profile (" << prof_.size() << " groups)\n";
        char line[256];
        // ms/call, GB/s and GFLOP/s over the calls after the first (the first alone when there
        // is one call); "first": the first call's ms
        std::snprintf(line, sizeof line, "  %-4s %-10s %10s %10s %8s %10s %10s  %s\n", "#", "kind",
                      "ms/call", "first", "calls", "GB/s", "GFLOP/s", "root");
        os << line;
        for (size_t i = 0; i < prof_.size(); ++i) {
            const Profile& p = prof_[i];
            if (!p.calls)
                continue;
            const Group& g = plan_.group(plan_.steps[i]);
            const char* library = library_kind(g.roots[0]->op());
            const char* kind = g.kind == Group::Kind::Kernel          ? "kernel"
                               : g.kind == Group::Kind::Dot           ? "gemm"
                               : g.kind == Group::Kind::Window        ? "window"
                               : g.kind == Group::Kind::View          ? "view"
                               : library                              ? library
                               : g.roots[0]->is(Op::Cond)             ? "cond"
                               : has_trait(g.roots[0]->op(), kRegion) ? "loop"
                                                                      : "reference";
            const Profile::Times& t = p.calls == 1 ? p.first : p.rest;
            const double s = t.ms / 1e3;
            std::snprintf(line, sizeof line,
                          "  %-4zu %-10s %10.4f %10.4f %8lld %10.2f %10.2f  %s\n", i, kind,
                          t.ms / double(std::max<int64_t>(p.calls - 1, 1)), p.first.ms,
                          static_cast<long long>(p.calls), s > 0 ? t.bytes / s / 1e9 : 0.0,
                          s > 0 ? t.flops / s / 1e9 : 0.0, g.roots[0]->describe(1).c_str());
            os << line;
        }
        // each loop body's own table, after the table with the loop's step
        for (const RegionRun& g : regions_)
            for (int w = 0; w < 2; ++w)
                if (g.body[w])
                    os << "[symjax] " << g.body_names[w] << " of " << g.name << ": "
                       << g.body[w]->profile_report().substr(std::strlen("[symjax] "));
        return os.str();
    }

    detail::ExecResult run(const std::vector<Array>& inputs, const std::vector<Array>& vals,
                           uint64_t counter) override {
        FlushDenormalsInTeam flush(opts_.flush_denormals);
        return run_into(inputs, vals, counter, nullptr);
    }

    /// run, computing output k into dests[k] where that is defined and the output is a buffer a
    /// step writes (a loop body's rows: Note [Loop rows in place] in ControlFlowKernels.cpp).
    detail::ExecResult run_into(const std::vector<Array>& inputs, const std::vector<Array>& vals,
                                uint64_t counter, const std::vector<Array>* dests) {
        struct ClearDests { // (clear keeps the capacity: no allocation per loop step)
            std::vector<std::pair<int, Array>>& d;
            ~ClearDests() { d.clear(); }
        } clear_dests{dests_};
        for (size_t k = 0; dests && k < dests->size() && k < plan_.output_slots.size(); ++k) {
            const int s = plan_.output_slots[k];
            if ((*dests)[k].defined() && !dest_of(s) &&
                plan_.slots[size_t(s)].source == compiler::SlotSource::Step)
                dests_.emplace_back(s, (*dests)[k]);
        }
        const CallPlan& plan = plan_for(inputs);
        plan.pool.resize(plan_.slots.size());

        std::vector<Array> env(plan_.slots.size());
        for (auto& g : regions_)
            g.results.clear();
        stats_.compiled_loops = stats_.step_kernels = 0;
        for (size_t s = 0; s < plan_.slots.size(); ++s) {
            const compiler::Slot& sl = plan_.slots[s];
            switch (sl.source) {
            case compiler::SlotSource::Input:
                env[s] = inputs[size_t(sl.index)];
                break;
            case compiler::SlotSource::Variable:
                env[s] = vals[size_t(sl.index)];
                break;
            case compiler::SlotSource::Constant:
                env[s] = sl.node->attr<ConstantAttrs>().value;
                break;
            case compiler::SlotSource::RngCounter:
                env[s] = Array::scalar<int64_t>(int64_t(counter));
                break;
            case compiler::SlotSource::Step:
                break;
            }
        }
        for (PackedWeight* pw : plan.packed)
            refresh_packed(*pw, env);
        stats_.packed_weights = plan.packed.size();
        if (prof_.size() != plan_.steps.size())
            prof_.assign(plan_.steps.size(), {});
        stats_.collective_wait_ms = 0;
        collectives_checked_ = false;
        struct SettleCollectives { // a step threw: leave no collective posted (MPI's order)
            CpuExecutable& e;
            ~SettleCollectives() {
                for (auto& p : e.pending_)
                    try {
                        dist::detail::finish(*p.request);
                    } catch (const Error&) { // the world is broken now; the step's error stands
                    }
                e.pending_.clear();
            }
        } settle{*this};
        for (size_t si = 0; si < plan_.steps.size(); ++si) {
            const compiler::Step& st = plan_.steps[si];
            const Group& g = plan_.group(st);
            if (!pending_.empty())
                await_collectives(st);
            if (si < interruptible_steps_ && poll_interrupt())
                SJ_THROW(Interrupted)
                    << "interrupted before step " << si << " of " << plan_.steps.size() << " ("
                    << g.roots[0]->describe(1) << "); no variable was changed";
            const bool timed = opts_.profile || detail::debug_level() >= 2;
            const auto t0 =
                timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
            execute(g, st, si, plan, env, counter);
            if (timed) {
                double ms =
                    ms_since(t0);
                Profile& p = prof_[si];
                Profile::Times& t = p.calls++ == 0 ? p.first : p.rest;
                t.ms += ms;
                t.bytes += double(plan.bound.steps[si].bytes);
                t.flops += plan.code[si].flops;
                if (detail::debug_level() >= 2)
                    std::fprintf(stderr, "[symjax] group %zu %s: %.3f ms\n", si,
                                 g.roots[0]->describe(1).c_str(), ms);
            }
            if (opts_.nan_guard)
                check_finite(g, st, env);
            for (int s : st.free_after)
                env[size_t(s)] = Array();
        }
        finish_collectives();
        // a region's results (stacked outputs, carry history) live in env now: do not hold them
        // until the next call
        for (auto& g : regions_)
            g.results.clear();
        detail::ExecResult r;
        for (int s : plan_.output_slots) {
            const Node* n = plan_.slots[size_t(s)].node;
            Array a = env[size_t(s)];
            // a variable returned as an output must not alias its buffer (updates may write it)
            if (n->is(Op::Variable) || n->is(Op::Constant))
                a = a.clone();
            r.outputs.push_back(a);
        }
        for (int s : plan_.update_slots)
            r.new_values.push_back(env[size_t(s)]);
        return r;
    }

private:
    /// A posted all_reduce, the slot it computes and the buffer it writes.
    struct PendingCollective {
        int slot;
        Array out;
        std::shared_ptr<dist::detail::Request> request;
    };

    /// The plan bound to the shapes of `inputs`: made on the first call with these shapes.
    const CallPlan& plan_for(const std::vector<Array>& inputs) {
        // the bound plan depends only on the shapes of inputs (variables and constants are static)
        // (the dims' bytes, each shape after its rank: formatting text here cost more than a
        // small kernel, and a loop body is called once per step)
        // a loop body sees the same shapes step after step: the last call's plan, found by
        // comparing shapes, before any key is built
        const CallPlan* last = last_plan_;
        if (last &&
            !std::equal(inputs.begin(), inputs.end(), last_shapes_.begin(), last_shapes_.end(),
                        [](const Array& a, const Shape& s) { return a.shape() == s; }))
            last = nullptr;
        if (!last) {
            std::string sig;
            for (const auto& a : inputs) {
                const int64_t rank = a.rank();
                sig.append(reinterpret_cast<const char*>(&rank), sizeof rank);
                sig.append(reinterpret_cast<const char*>(a.shape().data()),
                           sizeof(int64_t) * size_t(rank));
            }
            auto it = plans_.find(sig);
            if (it == plans_.end())
                it = plans_.emplace(sig, make_plan(inputs)).first;
            last = &it->second; // (std::map: the address stays valid)
            last_plan_ = last;
            last_shapes_.clear();
            for (const auto& a : inputs)
                last_shapes_.push_back(a.shape());
        }
        return *last;
    }

    int slot(const Node* n) const { return plan_.slot_of.at(n); }
    /// The slot a view step reshapes: its first read (compile() lists a library step's value
    /// operands in order, and a reshape's first is the data). Not looked up through the group's
    /// node: that chase of five pointers missed the caches after every large kernel and cost the
    /// paper network's step ~0.6 us per view, 154 views a step.
    static int view_source(const compiler::Step& st) { return st.in_slots[0]; }

    // ---- control flow (Note [Structured ops] in src/ops/ControlFlow.cpp) ----
    /// A region's nodes in this plan: which results they ask for, its bodies compiled once as
    /// executables of their own (fused and JIT-compiled like any program), and its results in
    /// the current call.
    struct RegionRun {
        std::vector<bool> wanted;
        std::unique_ptr<CpuExecutable> body[2];
        std::vector<Array> results;
        std::string name; // the loop's name, for the profile
        const char* body_names[2] = {"body", "condition"};
    };

    void add_region_node(const Node& n) {
        const detail::Region& r = *n.attr<RegionAttrs>().region;
        auto [it, fresh] = region_of_key_.emplace(detail::region_key(n), regions_.size());
        if (fresh) {
            RegionRun g;
            g.wanted.assign(size_t(r.num_results()), false);
            g.name = r.name;
            if (r.kind == detail::RegionKind::Cond)
                g.body_names[0] = "true branch", g.body_names[1] = "false branch";
            FunctionOptions o = opts_; // a profile times the bodies' kernels too
            g.body[0] = std::make_unique<CpuExecutable>(detail::body_program(r.body), o);
            if (r.kind != detail::RegionKind::Scan)
                g.body[1] = std::make_unique<CpuExecutable>(detail::body_program(r.body2), o);
            // the loop polls once per iteration, naming itself (Note [Interrupts between steps])
            for (auto& b : g.body)
                if (b) {
                    b->interruptible_steps_ = 0;
                    b->nested_ = true; // its profile is printed within this one's
                }
            regions_.push_back(std::move(g));
        }
        regions_[it->second].wanted[size_t(n.attr<RegionAttrs>().output)] = true;
        region_of_node_[&n] = it->second;
    }


    /// n's value: its region, run once per call for every result this plan asks for.
    Array region_result(const Node& n, const std::vector<Array>& in, uint64_t counter) {
        RegionRun& g = regions_[region_of_node_.at(&n)];
        if (g.results.empty()) {
            const detail::Region& r = *n.attr<RegionAttrs>().region;
            if (r.kind == detail::RegionKind::Scan)
                if (auto run = g.body[0]->run_scan_loop(r, in, g.wanted, counter)) {
                    g.results = std::move(run->results);
                    ++stats_.compiled_loops;
                    stats_.step_kernels += run->step_kernel;
                    return g.results[size_t(n.attr<RegionAttrs>().output)];
                }
            ref::BodyRunner run = [&](int which, const std::vector<Array>& args,
                                      const std::vector<Array>* dests) {
                return g.body[which]->run_into(args, {}, counter, dests).outputs;
            };
            g.results = ref::run_region(n, in, g.wanted, run);
        }
        return g.results[size_t(n.attr<RegionAttrs>().output)];
    }

    static char* bytes_of(const void* p) { return static_cast<char*>(const_cast<void*>(p)); }

    /// As the body of scan r (inputs `in`), the buffer of leaf slot x that stays put for the whole
    /// loop: a captured value, a constant, the call counter (`counter_value`); null for a carry
    /// or a sequence row, which move.
    static char* fixed_leaf(const compiler::Slot& x, const detail::Region& r,
                            const std::vector<Array>& in, const Array& counter_value) {
        switch (x.source) {
        case compiler::SlotSource::Input:
            return x.index < r.carries + r.sequences
                       ? nullptr
                       : bytes_of(in[size_t(r.captured_begin() + x.index - r.carries -
                                            r.sequences)]
                                      .raw());
        case compiler::SlotSource::Constant:
            return bytes_of(x.node->attr<ConstantAttrs>().value.raw());
        case compiler::SlotSource::RngCounter:
            return bytes_of(counter_value.raw());
        case compiler::SlotSource::Variable: // (a body program has no variables)
        case compiler::SlotSource::Step:
            break;
        }
        return nullptr;
    }

    // Note [Compiled scan loops]
    // A scan of a small body used to pay a whole call of the body's executable per step (the
    // argument and result vectors, the plan lookup, a destination list, one launch per step of
    // the plan): about 0.2 us, where a scalar cumulative sum does 1 ns of arithmetic. When every
    // step of the body's plan is a generated kernel that runs on one thread, or a view, the loop
    // runs here instead: each slot of the body's plan gets one address per iteration, fixed
    // (captured values, constants, intermediates), a row of an array (a sequence's row t, a
    // stacked output's row t, the carry history's row t + 1), or one of two buffers by the
    // parity of the iteration (a carry that no history keeps). A carry's input at iteration s
    // is where iteration s - 1 wrote it, so carries move between buffers without a copy. Each
    // iteration then only recomputes the moving addresses and calls the kernels' code with them
    // (their sizes and strides are the same at every step). A value that goes to two places (a
    // carry that is also a stacked output, and is kept in the history) is written to one and
    // copied to the other. Bodies with library calls, reference kernels, nested loops, or
    // kernels worth splitting over threads run step by step as before (Note [Loop rows in
    // place]), and so does every loop under a profile or nan_guard.

    /// As the body of scan `r` (inputs `in`: carries, sequences, captured values): runs the
    /// loop as a compiled loop when the body allows it (Note [Compiled scan loops]), giving
    /// the region's results; nullopt when it does not.
    struct LoopRun {
        std::vector<Array> results;
        bool step_kernel; // run as a step kernel (else as a compiled loop)
    };
    std::optional<LoopRun> run_scan_loop(const detail::Region& r,
                                                    const std::vector<Array>& in,
                                                    const std::vector<bool>& wanted,
                                                    uint64_t counter) {
        if (opts_.profile || opts_.nan_guard || detail::debug_level() >= 2)
            return std::nullopt;
        const int c = r.carries, o = r.outputs, q = r.sequences;
        const int64_t length = q > 0 ? in[size_t(c)].shape()[0] : r.length;
        if (length < 1)
            return std::nullopt;
        const int64_t t0 = r.reverse ? length - 1 : 0, dir = r.reverse ? -1 : 1;
        std::vector<Array> args(in.begin(), in.begin() + c);
        for (int j = 0; j < q; ++j)
            args.push_back(in[size_t(c + j)].row(t0));
        args.insert(args.end(), in.begin() + r.captured_begin(),
                    in.begin() + r.captured_begin() + r.captured);
        const CallPlan& plan = plan_for(args);
        // (a body belongs to one loop, whose wanted results are fixed when its function is made)
        if (!plan.step_kernel)
            plan.step_kernel = make_step_kernel(plan, r, wanted);
        const StepKernel* sk = plan.step_kernel->get();
        if (!sk && plan.loopable < 0)
            plan.loopable = loopable(plan, c, o);
        if (!sk && !plan.loopable)
            return std::nullopt;

        std::vector<TensorType> in_types;
        for (const auto& a : in)
            in_types.push_back({a.dtype(), a.shape()});
        const std::vector<TensorType> types = detail::region_result_types(r, in_types, true);
        std::vector<Array> res(types.size());
        for (int k = c; k < 2 * c + o; ++k)
            if (wanted[size_t(k)])
                res[size_t(k)] =
                    Array::uninitialized(types[size_t(k)].dtype, types[size_t(k)].shape);

        if (sk)
            return LoopRun{run_step_kernel(*sk, r, in, std::move(res), length, counter), true};

        // each slot's address at iteration s: base + s * stride, or alt at odd s when alt is set
        struct Home {
            int slot;
            char* base;
            int64_t stride;
            char* alt;
        };
        std::vector<char*> cur(plan_.slots.size(), nullptr);
        std::vector<Home> moving;
        std::vector<Array> held; // buffers the loop owns: intermediates, parity pairs
        auto row_home = [&](int slot, const Array& a, int64_t first_row) {
            const int64_t rb = row_bytes(a);
            moving.push_back({slot, bytes_of(a.raw()) + first_row * rb, dir * rb, nullptr});
        };
        auto new_buffer = [&](int slot) {
            const TensorType& t = plan.bound.types[size_t(slot)];
            held.push_back(Array::uninitialized(t.dtype, t.shape));
            return bytes_of(held.back().raw());
        };
        Array counter_value = Array::scalar<int64_t>(int64_t(counter));
        for (size_t sl = 0; sl < plan_.slots.size(); ++sl) {
            const compiler::Slot& x = plan_.slots[sl];
            cur[sl] = fixed_leaf(x, r, in, counter_value);
            if (x.source == compiler::SlotSource::Input && x.index < c)
                cur[sl] = bytes_of(in[size_t(x.index)].raw()); // the first iteration's carry
            else if (x.source == compiler::SlotSource::Input && x.index < c + q)
                row_home(int(sl), in[size_t(x.index)], t0);
        }
        // where the body's results go; a slot that is several results is written to the first
        // and copied to the others
        struct Copy {
            int slot;
            char* base;
            int64_t stride;
            int64_t bytes;
            bool last_too; // also at the last iteration (a history row t + 1 has none)
        };
        std::vector<Copy> copies;
        std::vector<char> homed(plan_.slots.size(), 0);
        auto home_in_row = [&](int slot, const Array& a, int64_t first_row, bool last_too) {
            if (homed[size_t(slot)]) {
                const int64_t rb = row_bytes(a);
                copies.push_back(
                    {slot, bytes_of(a.raw()) + first_row * rb, dir * rb, rb, last_too});
            } else {
                homed[size_t(slot)] = 1;
                row_home(slot, a, first_row);
            }
        };
        for (int i = 0; i < o; ++i)
            if (wanted[size_t(c + i)])
                home_in_row(plan_.output_slots[size_t(c + i)], res[size_t(c + i)], t0, true);
        std::vector<std::pair<int, char*>> last_homes; // carries kept in a history: at the last
                                                       // iteration, their own final buffer
        std::vector<Array> final_carry(static_cast<size_t>(c));
        for (int i = 0; i < c; ++i) {
            const int sl = plan_.output_slots[size_t(i)];
            const Array* hist = wanted[size_t(c + o + i)] ? &res[size_t(c + o + i)] : nullptr;
            if (hist) {
                // row t of the history holds the carry iteration t receives
                std::memcpy(bytes_of(hist->raw()) + t0 * row_bytes(*hist),
                            in[size_t(i)].raw(), size_t(in[size_t(i)].nbytes()));
                if (length > 1) {
                    const bool first = !homed[size_t(sl)];
                    home_in_row(sl, *hist, t0 + dir, false);
                    if (first) {
                        const TensorType& t = plan.bound.types[size_t(sl)];
                        final_carry[size_t(i)] = Array::uninitialized(t.dtype, t.shape);
                        last_homes.emplace_back(sl, bytes_of(final_carry[size_t(i)].raw()));
                    }
                }
            }
            if (!homed[size_t(sl)]) { // two buffers, by the parity of the iteration
                homed[size_t(sl)] = 1;
                char* a = new_buffer(sl);
                moving.push_back({sl, a, 0, new_buffer(sl)});
            }
        }
        for (const compiler::Step& st : plan_.steps)
            if (st.kind == compiler::StepKind::Kernel)
                for (int sl : st.out_slots)
                    if (!homed[size_t(sl)]) {
                        homed[size_t(sl)] = 1;
                        cur[size_t(sl)] = new_buffer(sl);
                    }
        // the carries' input slots (-1: the body does not read that carry)
        std::vector<int> carry_in(size_t(c), -1);
        for (size_t sl = 0; sl < plan_.slots.size(); ++sl)
            if (plan_.slots[sl].source == compiler::SlotSource::Input && plan_.slots[sl].index < c)
                carry_in[size_t(plan_.slots[sl].index)] = int(sl);

        // a view's source slot, per step
        std::vector<int> view_of(plan_.steps.size(), -1);
        for (size_t si = 0; si < plan_.steps.size(); ++si)
            if (plan_.steps[si].kind == compiler::StepKind::View)
                view_of[si] = view_source(plan_.steps[si]);

        std::vector<void*> bufs;
        for (int64_t s = 0; s < length; ++s) {
            if (poll_interrupt())
                SJ_THROW(Interrupted) << r.name << ": interrupted after " << s << " of " << length
                                      << " steps; no variable was changed";
            for (const Home& h : moving)
                cur[size_t(h.slot)] = h.alt && (s & 1) ? h.alt : h.base + s * h.stride;
            if (s == length - 1)
                for (const auto& [sl, a] : last_homes)
                    cur[size_t(sl)] = a;
            for (size_t si = 0; si < plan_.steps.size(); ++si) {
                const compiler::Step& st = plan_.steps[si];
                if (view_of[si] >= 0) {
                    cur[size_t(st.out_slots[0])] = cur[size_t(view_of[si])];
                    continue;
                }
                bufs.clear();
                for (int sl : st.in_slots)
                    bufs.push_back(cur[size_t(sl)]);
                for (int sl : st.out_slots)
                    bufs.push_back(cur[size_t(sl)]);
                const auto& L = plan.bound.steps[si].launch;
                plan.code[si].fn(bufs.data(), L.params.data(), 0, L.outer);
            }
            for (const Copy& k : copies)
                if (k.last_too || s + 1 < length)
                    std::memcpy(k.base + s * k.stride, cur[size_t(k.slot)], size_t(k.bytes));
            for (int i = 0; i < c; ++i)
                if (carry_in[size_t(i)] >= 0)
                    cur[size_t(carry_in[size_t(i)])] = cur[size_t(plan_.output_slots[size_t(i)])];
        }
        // the final carries: in their own buffer, or copied out of the row or parity buffer
        // they were last written to
        for (int i = 0; i < c; ++i) {
            const int sl = plan_.output_slots[size_t(i)];
            if (!final_carry[size_t(i)].defined() ||
                final_carry[size_t(i)].raw() != cur[size_t(sl)]) {
                const TensorType& t = plan.bound.types[size_t(sl)];
                final_carry[size_t(i)] = Array::uninitialized(t.dtype, t.shape);
                std::memcpy(final_carry[size_t(i)].raw(), cur[size_t(sl)],
                            size_t(final_carry[size_t(i)].nbytes()));
            }
            res[size_t(i)] = std::move(final_carry[size_t(i)]);
        }
        return LoopRun{std::move(res), false};
    }

    // Note [Step kernels]
    // The commonest small scan body is one elementwise kernel: a cumulative sum, an
    // exponential moving average, an elementwise recurrence. Even the compiled loop (Note
    // [Compiled scan loops]) calls that kernel once per step, 8 ns for a scalar sum against
    // less than 1 ns of arithmetic, and the carry goes through memory each time. So such a body
    // becomes one step kernel (KernelSpec::steps, rendered by LlvmRenderer's emit_steps): at
    // each point of the body's kernel a sequential loop runs the steps, the carries in
    // registers, each sequence row and stacked output moving by its own step stride (reverse
    // scans move backwards). The carries are read once, before the first step, and stored once
    // after the last; a carry's history, when a gradient keeps it, is stored at each step from
    // the register. The points are independent of each other, so a large body splits them over
    // the threads like any kernel; the steps run in chunks so that the loop polls for
    // interrupts between them. It applies when each carry enters through exactly one load laid
    // out like the carry it makes (same strides, not a broadcast), the kernel has no reductions,
    // and every carry and stacked output is one of its results.

    /// The body plan's step kernel, or null when the body is not one elementwise kernel.
    std::shared_ptr<const StepKernel> make_step_kernel(const CallPlan& plan,
                                                       const detail::Region& r,
                                                       const std::vector<bool>& wanted) const {
        const int c = r.carries, o = r.outputs, q = r.sequences;
        int kernel = -1;
        std::vector<int> view_src(plan_.slots.size(), -1);
        for (size_t si = 0; si < plan_.steps.size(); ++si) {
            const compiler::Step& st = plan_.steps[si];
            switch (st.kind) {
            case compiler::StepKind::View:
                view_src[size_t(st.out_slots[0])] = view_source(st);
                continue;
            case compiler::StepKind::Kernel:
                if (kernel >= 0)
                    return nullptr;
                kernel = int(si);
                continue;
            case compiler::StepKind::Dot:
            case compiler::StepKind::Window:
            case compiler::StepKind::Fallback:
                return nullptr;
            }
        }
        if (kernel < 0 || plan_.output_slots.size() != size_t(c + o))
            return nullptr;
        const compiler::Step& st = plan_.steps[size_t(kernel)];
        const compiler::KernelLaunch& L = plan.bound.steps[size_t(kernel)].launch;
        const compiler::KernelSpec& ks = L.spec;
        if (ks.reduce_rank > 0 || ks.row > 0 || L.points == 0 || ks.steps)
            return nullptr;
        const int R = ks.rank, nl = int(st.in_slots.size());
        auto layout = [&](int operand) { // its strides and offset in the body kernel's params
            auto b = L.params.begin() + R + operand * (R + 1);
            return std::vector<int64_t>(b, b + R + 1);
        };
        auto kernel_output = [&](int sl) {
            for (size_t k = 0; k < st.out_slots.size(); ++k)
                if (st.out_slots[k] == sl)
                    return int(k);
            return -1;
        };
        auto sk = std::make_shared<StepKernel>();
        sk->spec = ks;
        sk->spec.steps = true;
        sk->spec.outputs.clear();
        sk->spec.out_inner.clear();
        sk->spec.carry_load.assign(size_t(c), -1);
        sk->spec.carry_next.assign(size_t(c), -1);
        sk->params.assign(L.params.begin(), L.params.begin() + R + nl * (R + 1));
        for (int k = 0; k < nl; ++k) {
            int sl = st.in_slots[size_t(k)];
            while (view_src[size_t(sl)] >= 0)
                sl = view_src[size_t(sl)];
            const compiler::Slot& x = plan_.slots[size_t(sl)];
            if (x.source == compiler::SlotSource::Input && x.index < c) {
                if (sk->spec.carry_load[size_t(x.index)] >= 0)
                    return nullptr; // read twice: a broadcast or a permutation of it
                sk->spec.carry_load[size_t(x.index)] = k;
                sk->operands.push_back({StepKernel::From::Carry, x.index});
            } else if (x.source == compiler::SlotSource::Input && x.index < c + q) {
                sk->operands.push_back({StepKernel::From::Sequence, x.index - c});
            } else if (x.source == compiler::SlotSource::Step ||
                       x.source == compiler::SlotSource::Variable) {
                return nullptr;
            } else {
                sk->operands.push_back({StepKernel::From::Slot, sl});
            }
        }
        auto add_output = [&](int from_output, compiler::KOutput out, StepKernel::From f, int i) {
            sk->spec.outputs.push_back(out);
            sk->spec.out_inner.push_back(ks.out_inner[size_t(from_output)]);
            auto lay = layout(nl + from_output);
            sk->params.insert(sk->params.end(), lay.begin(), lay.end());
            sk->operands.push_back({f, i});
        };
        for (int i = 0; i < c; ++i) {
            const int ko = kernel_output(plan_.output_slots[size_t(i)]);
            const int k = sk->spec.carry_load[size_t(i)];
            // the carry must enter where it leaves: one load, laid out like the result
            if (ko < 0 || k < 0 || layout(k) != layout(nl + ko))
                return nullptr;
            sk->spec.carry_next[size_t(i)] = ks.outputs[size_t(ko)].value;
            compiler::KOutput fin = ks.outputs[size_t(ko)];
            fin.carry = i;
            fin.final = true;
            add_output(ko, fin, StepKernel::From::Final, i);
            if (wanted[size_t(c + o + i)]) {
                compiler::KOutput h = fin;
                h.final = false;
                add_output(ko, h, StepKernel::From::History, i);
            }
        }
        for (int j = 0; j < o; ++j) {
            const int ko = kernel_output(plan_.output_slots[size_t(c + j)]);
            if (ko < 0)
                return nullptr;
            if (wanted[size_t(c + j)])
                add_output(ko, ks.outputs[size_t(ko)], StepKernel::From::Stacked, j);
        }
        sk->params.push_back(0); // the step count, then the step strides
        sk->params.resize(size_t(sk->spec.num_params()), 0);
        sk->outer = L.outer;
        sk->work = plan.bound.steps[size_t(kernel)].work;
        sk->fn = get_kernel(sk->spec, sk->holds);
        return sk;
    }

    /// Runs scan `r` as step kernel `sk` into `res` (its stacked outputs and histories
    /// allocated), giving the region's results.
    std::vector<Array> run_step_kernel(const StepKernel& sk, const detail::Region& r,
                                       const std::vector<Array>& in, std::vector<Array> res,
                                       int64_t length, uint64_t counter) const {
        const int c = r.carries, o = r.outputs;
        const int64_t t0 = r.reverse ? length - 1 : 0, dir = r.reverse ? -1 : 1;
        const compiler::KernelSpec& ks = sk.spec;
        std::vector<int64_t> params = sk.params;
        const size_t steps_at = size_t(ks.steps_param());
        auto row_elems = [](const Array& a) { return a.size() / a.shape()[0]; };
        auto row_at = [](const Array& a, int64_t t) { return bytes_of(a.raw()) + t * row_bytes(a); };
        auto array_of = [&](const StepKernel::Operand& x) -> const Array& {
            switch (x.from) {
            case StepKernel::From::Sequence:
                return in[size_t(c + x.index)];
            case StepKernel::From::Stacked:
                return res[size_t(c + x.index)];
            case StepKernel::From::History:
                return res[size_t(c + o + x.index)];
            case StepKernel::From::Slot:
            case StepKernel::From::Carry:
            case StepKernel::From::Final:
                break;
            }
            return in[0];
        };
        for (size_t k = 0; k < sk.operands.size(); ++k) {
            const auto& x = sk.operands[k];
            const bool moves = x.from == StepKernel::From::Sequence ||
                               x.from == StepKernel::From::Stacked ||
                               x.from == StepKernel::From::History;
            params[steps_at + 1 + k] = moves ? dir * row_elems(array_of(x)) : 0;
        }
        Array counter_value = Array::scalar<int64_t>(int64_t(counter));
        std::vector<void*> bufs(sk.operands.size(), nullptr);
        for (size_t k = 0; k < sk.operands.size(); ++k) {
            const auto& x = sk.operands[k];
            if (x.from == StepKernel::From::Slot)
                bufs[k] = fixed_leaf(plan_.slots[size_t(x.index)], r, in, counter_value);
        }
        // each chunk's final carries go to one of two buffers, the next chunk's carries in
        std::vector<Array> fin[2];
        std::vector<const void*> carry(static_cast<size_t>(c));
        for (int i = 0; i < c; ++i)
            carry[size_t(i)] = in[size_t(i)].raw();
        ThreadPool& pool = ThreadPool::get();
        // chunks of about kChunkWork byte-equivalents: a poll every few milliseconds at most
        constexpr int64_t kChunkWork = int64_t(1) << 24;
        const int64_t chunk = std::max<int64_t>(1, kChunkWork / std::max<int64_t>(1, sk.work));
        for (int64_t s0 = 0, n = 0, part = 0; s0 < length; s0 += n, ++part) {
            if (poll_interrupt())
                SJ_THROW(Interrupted) << r.name << ": interrupted after " << s0 << " of " << length
                                      << " steps; no variable was changed";
            n = std::min(chunk, length - s0);
            const int64_t t = t0 + dir * s0;
            std::vector<Array>& f = fin[part & 1];
            for (size_t k = 0; k < sk.operands.size(); ++k) {
                const auto& x = sk.operands[k];
                switch (x.from) {
                case StepKernel::From::Slot:
                    break;
                case StepKernel::From::Carry:
                    bufs[k] = bytes_of(carry[size_t(x.index)]);
                    break;
                case StepKernel::From::Final:
                    if (f.empty())
                        for (int i = 0; i < c; ++i)
                            f.push_back(
                                Array::uninitialized(in[size_t(i)].dtype(), in[size_t(i)].shape()));
                    bufs[k] = f[size_t(x.index)].raw();
                    break;
                case StepKernel::From::Sequence:
                case StepKernel::From::Stacked:
                case StepKernel::From::History:
                    bufs[k] = row_at(array_of(x), t);
                    break;
                }
            }
            params[steps_at] = n;
            const KernelFn fn = sk.fn;
            if (sk.work * n >= parallel_work() && sk.outer > 1 && pool.threads() > 1) {
                // the points are independent: each thread takes whole points, all their steps
                const int nt = int(std::min<int64_t>(pool.threads(), sk.outer));
                pool.run(nt, [&](int th) {
                    fn(bufs.data(), params.data(), sk.outer * th / nt, sk.outer * (th + 1) / nt);
                });
            } else {
                fn(bufs.data(), params.data(), 0, sk.outer);
            }
            for (int i = 0; i < c; ++i)
                carry[size_t(i)] = f.empty() ? carry[size_t(i)] : f[size_t(i)].raw();
        }
        for (int i = 0; i < c; ++i)
            for (auto& f : fin)
                if (!f.empty() && f[size_t(i)].raw() == carry[size_t(i)])
                    res[size_t(i)] = f[size_t(i)];
        return res;
    }

    /// Whether a bound body plan can run as a compiled loop (Note [Compiled scan loops]): only
    /// kernels on one thread and views, and each of the c carries and o stacked outputs a
    /// kernel's result, no two carries the same value.
    bool loopable(const CallPlan& plan, int c, int o) const {
        std::vector<char> by_kernel(plan_.slots.size(), 0);
        for (size_t si = 0; si < plan_.steps.size(); ++si) {
            const compiler::Step& st = plan_.steps[si];
            const auto& b = plan.bound.steps[si];
            switch (st.kind) {
            case compiler::StepKind::View:
                continue;
            case compiler::StepKind::Kernel:
                if (splits(b) || b.launch.points == 0 || !plan.code[si].fn)
                    return false;
                for (int v : st.inplace_var)
                    if (v >= 0)
                        return false;
                for (int sl : st.out_slots)
                    by_kernel[size_t(sl)] = 1;
                continue;
            case compiler::StepKind::Dot:
            case compiler::StepKind::Window:
            case compiler::StepKind::Fallback:
                return false;
            }
        }
        if (plan_.output_slots.size() != size_t(c + o))
            return false;
        for (int k = 0; k < c + o; ++k) {
            const int sl = plan_.output_slots[size_t(k)];
            if (!by_kernel[size_t(sl)])
                return false;
            for (int j = 0; j < k && k < c; ++j)
                if (plan_.output_slots[size_t(j)] == sl)
                    return false;
        }
        return true;
    }

    /// The variables this function updates.
    std::unordered_set<const Node*> updated_variables() const {
        std::unordered_set<const Node*> updated;
        for (const auto& u : plan_.program.updates)
            updated.insert(plan_.program.variables[u.first].get());
        return updated;
    }

    /// Whether a conv's weights are computed from constants and from variables not in `updated`
    /// (at most 256 nodes looked at): then oneDNN's Winograd kernels, whose weight transform is
    /// kept between calls, pay off (Note [Winograd convolutions] in Conv.cpp). An input, an rng
    /// counter or random bits change between calls.
    static bool fixed_weights(const Node* w, const std::unordered_set<const Node*>& updated) {
        std::vector<const Node*> stack{w}, seen;
        while (!stack.empty()) {
            const Node* n = stack.back();
            stack.pop_back();
            if (std::find(seen.begin(), seen.end(), n) != seen.end())
                continue;
            const bool fixed_leaf =
                n->is(Op::Constant) || (n->is(Op::Variable) && !updated.count(n));
            if (seen.size() >= 256 || has_trait(n->op(), kRandom) ||
                (has_trait(n->op(), kLeaf) && !fixed_leaf))
                return false;
            seen.push_back(n);
            for (const auto& i : n->inputs())
                stack.push_back(i.get());
        }
        return true;
    }

    /// Binds the shapes of one call (compiler::bind: concrete types, which also checks every op
    /// on these shapes before anything runs; kernel launches) and makes its code: the kernels,
    /// compiled together, and oneDNN's primitives.
    CallPlan make_plan(const std::vector<Array>& inputs) {
        CallPlan plan;
        std::vector<TensorType> in;
        for (const auto& a : inputs)
            in.push_back({a.dtype(), a.shape()});
        plan.bound = compiler::bind(plan_, in);
        const auto& types = plan.bound.node_types;
        plan.code.resize(plan_.steps.size());
        const std::unordered_set<const Node*> updated = updated_variables();
        for (size_t si = 0; si < plan_.steps.size(); ++si) {
            const compiler::Step& st = plan_.steps[si];
            const Group& g = plan_.group(st);
            StepCode& sc = plan.code[si];
            switch (st.kind) {
            case compiler::StepKind::Kernel: {
                const auto& launch = plan.bound.steps[si].launch;
                sc.flops = double(launch.points) * double(g.insts.size());
                if (splits(plan.bound.steps[si]))
                    sc.chunks = reduce_chunks(launch);
                // the chunks' private outputs (Note [Chunk partials stay allocated])
                sc.partials.assign(sc.chunks.size(), {});
                for (auto& part : sc.partials)
                    for (size_t k = 0; k < st.out_slots.size(); ++k) {
                        const TensorType& t = plan.bound.types[size_t(st.out_slots[k])];
                        part.push_back(g.outputs[k].reduced ? Array::uninitialized(t.dtype, t.shape)
                                                            : Array());
                    }
                if (detail::debug_level() >= 4)
                    std::fprintf(stderr, "[symjax] kernel %zu IR:\n%s", si,
                                 launch.spec.str().c_str());
                detail::dump_file("kernel_" + std::to_string(si) + ".txt", launch.spec.str());
                if (detail::debug_level() >= 4 || detail::dumping())
                    detail::dump_file("kernel_" + std::to_string(si) + ".ll",
                                      kernel_llvm_ir(launch.spec));
                break;
            }
            case compiler::StepKind::Dot: {
                const Node* r = g.roots[0].get();
                sc.flops = dot_flops(types.at(r->input(0).get()).shape, r->attr<DotAttrs>(),
                                     types.at(r).shape);
                break;
            }
            case compiler::StepKind::Window: {
                const Node* r = g.roots[0].get();
                std::vector<TensorType> ins;
                for (const auto& x : r->inputs())
                    ins.push_back(types.at(x.get()));
                sc.window =
                    window_primitive(*r, ins, types.at(r), g.epilogue, false,
                                     r->is(Op::Conv) && fixed_weights(r->input(1).get(), updated));
                sc.flops = window_flops(*r, ins, types.at(r));
                if (r->is(Op::Conv))
                    if (auto it = plan_.slot_of.find(r->input(1).get()); it != plan_.slot_of.end())
                        if (const compiler::Slot& ws = plan_.slots[size_t(it->second)];
                            ws.source == compiler::SlotSource::Variable)
                            sc.weights_var = ws.node->attr<VariableAttrs>().state.get();
                break;
            }
            case compiler::StepKind::View:
            case compiler::StepKind::Fallback:
                break;
            }
        }
        pair_max_pools(plan);
        plan_packed_weights(plan);
        {
            compiler::SharedBuffers sb = compiler::share_buffers(plan_, plan.bound.types);
            plan.pool_entry = std::move(sb.entry);
            plan.buffer_bytes = sb.bytes;
        }
        // every kernel's code at once: one object per function (Note [One object per function])
        std::vector<const compiler::KernelSpec*> specs;
        for (size_t si = 0; si < plan_.steps.size(); ++si)
            if (plan_.steps[si].kind == compiler::StepKind::Kernel)
                specs.push_back(&plan.bound.steps[si].launch.spec);
        CompileInfo info;
        std::vector<KernelFn> fns = get_kernels(specs, plan.holds, &info);
        for (size_t si = 0, k = 0; si < plan_.steps.size(); ++si)
            if (plan_.steps[si].kind == compiler::StepKind::Kernel)
                plan.code[si].fn = fns[k++];
        if (detail::debug_level() >= 1)
            std::fprintf(stderr,
                         "[symjax] %zu kernels: %zu already loaded, %zu from the disk cache, %zu "
                         "compiled; %.1f ms\n",
                         info.kernels, info.memory_hits, info.disk_hits, info.compiled, info.ms);
        stats_.intermediate_bytes = plan.bound.intermediate_bytes;
        stats_.peak_arena_bytes = plan.bound.peak_bytes;
        stats_.buffer_bytes = plan.buffer_bytes;
        // a window call starts the team once, unless it is a small pool; a kernel when it
        // splits (run_kernel); a matmul unless it is small (dot_parallel_regions)
        const bool team = ThreadPool::get().threads() > 1;
        stats_.parallel_regions = 0;
        for (size_t si = 0; si < plan_.steps.size() && team; ++si) {
            const auto& step = plan_.steps[si];
            const auto& b = plan.bound.steps[si];
            if (step.kind == compiler::StepKind::Kernel)
                stats_.parallel_regions += splits(b);
            else if (step.kind == compiler::StepKind::Dot) {
                const Node* r = plan_.group(step).roots[0].get();
                stats_.parallel_regions += dot_parallel_regions(
                    types.at(r->input(0).get()).shape, types.at(r->input(1).get()).shape,
                    r->attr<DotAttrs>(), types.at(r).dtype);
            }
            else if (step.kind == compiler::StepKind::Window)
                stats_.parallel_regions +=
                    !plan.code[si].window || runs_on_team(*plan.code[si].window);
        }
        return plan;
    }

    /// Note [Packed weights]: for each variable that this plan's matmuls read as their [K, N]
    /// rhs, the packed copy those matmuls read, when the function does not update the variable
    /// or an elementwise kernel after them writes its new value in row-major order (that kernel
    /// then writes the copy too).
    void plan_packed_weights(CallPlan& plan) {
        const auto& types = plan.bound.node_types;
        // one pass over the steps and one over the updates: S + V for S steps and V variables,
        // not S * V (see SlotPool on a 30,000-layer MLP step)
        std::map<int, std::vector<size_t>> readers_of; // variable slot -> its matmul steps
        std::vector<std::pair<size_t, int>> producer(plan_.slots.size(), {0, -1}); // step, output
        for (size_t si = 0; si < plan_.steps.size(); ++si) {
            const compiler::Step& st = plan_.steps[si];
            for (size_t o = 0; o < st.out_slots.size(); ++o)
                producer[size_t(st.out_slots[o])] = {si, int(o)};
            if (st.kind != compiler::StepKind::Dot)
                continue;
            const int rhs = slot(plan_.group(st).roots[0]->input(1).get());
            if (plan_.slots[size_t(rhs)].source == compiler::SlotSource::Variable)
                readers_of[rhs].push_back(si);
        }
        std::unordered_map<int, int> new_value; // variable index -> the slot of its new value
        for (size_t k = 0; k < plan_.update_slots.size(); ++k)
            new_value[plan_.program.updates[k].first] = plan_.update_slots[k];
        for (auto& [vs, matmuls] : readers_of) {
            const compiler::Slot& sl = plan_.slots[size_t(vs)];
            const Shape& ws = plan.bound.types[size_t(vs)].shape;
            if (plan.bound.types[size_t(vs)].dtype != DType::F32 || ws.size() != 2)
                continue;
            // the kernel computing its new value, if the function updates it: step us, output uo
            size_t us = plan_.steps.size();
            int uo = -1;
            int64_t inner = 0;
            if (auto it = new_value.find(sl.index); it != new_value.end()) {
                std::tie(us, uo) = producer[size_t(it->second)];
                if (uo >= 0 && plan_.steps[us].kind == compiler::StepKind::Kernel)
                    inner = row_major_inner(plan.bound.steps[us].launch, size_t(uo), ws);
                if (inner <= 0) // (an update the copy cannot follow: stale at every call)
                    continue;
            }
            // the matmuls (before the update) that can read the copy
            std::vector<size_t> readers;
            for (size_t si : matmuls) {
                const Group& g = plan_.group(plan_.steps[si]);
                const Node* r = g.roots[0].get();
                if (si < us && dot_packs_rhs(types.at(r->input(0).get()).shape, ws,
                                             r->attr<DotAttrs>(), types.at(r).dtype, g.epilogue))
                    readers.push_back(si);
            }
            if (readers.empty())
                continue;
            PackedWeight& pw = packed_[vs];
            if (!pw.copy.defined()) {
                pw.state = sl.node->attr<VariableAttrs>().state.get();
                pw.slot = vs;
                pw.K = ws[0], pw.N = ws[1];
                pw.copy = Array::uninitialized(DType::F32, {pw.K * pw.N});
            }
            for (size_t si : readers)
                plan.code[si].packed_rhs = &pw;
            if (uo >= 0) {
                StepCode& uc = plan.code[us];
                uc.packs = &pw;
                uc.packs_out = uo;
                uc.pack_inner = inner;
                uc.pack_trips = std::max<int64_t>(1, 16 * pw.N / inner);
            }
            plan.packed.push_back(&pw);
        }
    }

    /// Elements per trip of loop 0 when kernel output `o` of launch L is the row-major [K, N]
    /// value `shape` (no reductions, offset 0, strides those of a contiguous array over the
    /// loops' sizes), so that trips [b, e) write elements [b * inner, e * inner); else 0.
    static int64_t row_major_inner(const compiler::KernelLaunch& L, size_t o, const Shape& shape) {
        const compiler::KernelSpec& sp = L.spec;
        if (sp.reduce_rank != 0 || sp.steps || sp.row != 0 || L.split_reduce || L.outer <= 0)
            return 0;
        const size_t rank = size_t(sp.rank);
        const size_t at = rank + (sp.load_dtypes.size() + o) * (rank + 1); // its strides
        if (sp.outputs[o].dtype != DType::F32 || L.params[at + rank] != 0)
            return 0;
        int64_t expect = 1;
        for (size_t d = rank; d-- > 0;) {
            if (L.params[d] > 1 && L.params[at + d] != expect)
                return 0;
            expect *= L.params[d];
        }
        if (expect != shape[0] * shape[1])
            return 0;
        return expect / L.outer;
    }

    /// A stale packed copy (Note [Packed weights]) packed again from the variable's value.
    void refresh_packed(PackedWeight& pw, const std::vector<Array>& env) {
        pw.written = false;
        const uint64_t now = pw.state->current_version();
        if (pw.holds == now)
            return;
        const float* w = static_cast<const float*>(env[size_t(pw.slot)].raw());
        float* copy = static_cast<float*>(pw.copy.raw());
        const int64_t n = pw.K * pw.N;
        ThreadPool& pool = ThreadPool::get();
        const int nt = pool.threads();
        pool.run(nt, [&](int t) { pack_rhs(w, copy, pw.K, pw.N, n * t / nt, n * (t + 1) / nt); });
        pw.holds = now;
    }

    /// Pairs each max_pool_backward(x, dy) step with an earlier step pooling the same x with the
    /// same window, so that the forward keeps its workspace for the backward (Note [Max-pool
    /// workspace] in Conv.cpp); pairs whose workspace layouts differ are left alone.
    void pair_max_pools(CallPlan& plan) const {
        const auto& types = plan.bound.node_types;
        auto window_types = [&](const Node* r) {
            std::vector<TensorType> ins;
            for (const auto& x : r->inputs()) ins.push_back(types.at(x.get()));
            return ins;
        };
        for (size_t j = 0; j < plan_.steps.size(); ++j) {
            const Node* b = plan_.group(plan_.steps[j]).roots[0].get();
            if (plan_.steps[j].kind != compiler::StepKind::Window || !b->is(Op::MaxPoolBackward) ||
                !plan.code[j].window)
                continue;
            for (size_t i = 0; i < j; ++i) {
                const Group& fg = plan_.group(plan_.steps[i]);
                const Node* f = fg.roots[0].get();
                if (plan_.steps[i].kind != compiler::StepKind::Window || !f->is(Op::Pool) ||
                    f->input(0) != b->input(0) || !(f->attr<PoolAttrs>().tie() == b->attr<PoolAttrs>().tie()) ||
                    plan.code[i].window == nullptr || plan.code[i].workspace >= 0)
                    continue;
                auto kept = window_primitive(*f, window_types(f), types.at(f), fg.epilogue, true);
                if (!kept || !shares_workspace(*kept, *plan.code[j].window)) continue;
                plan.code[i].window = std::move(kept);
                plan.code[i].workspace = plan.code[j].workspace = int(plan.workspaces.size());
                plan.workspaces.emplace_back();
                break;
            }
        }
    }

    void execute(const Group& g, const compiler::Step& gc, size_t si, const CallPlan& plan,
                 std::vector<Array>& env, uint64_t counter) {
        switch (gc.kind) { // (the step's copy: the group is likely out of the caches)
        case Group::Kind::View: {
            env[gc.out_slots[0]] =
                env[view_source(gc)].reshape(plan.bound.types[gc.out_slots[0]].shape);
            return;
        }
        case Group::Kind::Dot: {
            const Node* r = g.roots[0].get();
            const TensorType& t = plan.bound.types[gc.out_slots[0]];
            const Array &lhs = env[slot(r->input(0).get())], &rhs = env[slot(r->input(1).get())];
            const auto& dims = r->attr<DotAttrs>();
            const int acc = accumulated_slot(g);
            Array out;
            bool applied = false;
            if (const PackedWeight* pw = plan.code[si].packed_rhs) { // (Note [Packed weights])
                out = acc >= 0 ? accumulator(g, gc, acc, plan, env)
                               : buffer(plan, gc.out_slots[0], t);
                dot_general_packed(lhs, static_cast<const float*>(pw->copy.raw()), rhs.shape(),
                                   dims, out, g.epilogue, post_operands(g, env),
                                   &plan.code[si].memories);
                env[gc.out_slots[0]] = std::move(out);
                return;
            }
            if (acc >= 0 && !dot_can_accumulate(lhs, rhs, dims, env[size_t(acc)])) {
                out = buffer(plan, gc.out_slots[0], t); // the plain product, then the epilogue
                dot_general(lhs, rhs, dims, out, {}, {}, &plan.code[si].memories);
            } else {
                out = acc >= 0 ? accumulator(g, gc, acc, plan, env)
                               : buffer(plan, gc.out_slots[0], t);
                applied = dot_general(lhs, rhs, dims, out, g.epilogue, post_operands(g, env),
                                      &plan.code[si].memories);
            }
            if (!applied)
                out = epilogue_reference(g, out, plan, env, counter);
            env[gc.out_slots[0]] = std::move(out);
            return;
        }
        case Group::Kind::Window: {
            const Node* r = g.roots[0].get();
            if (!plan.code[si].window) { // oneDNN declined these shapes (or an operand is empty)
                std::vector<Array> ins = fallback_inputs(*r, env);
                if (g.epilogue.empty()) {
                    env[gc.out_slots[0]] = run_fallback(*r, ins, plan, counter);
                    return;
                }
                ref::KernelCtx ctx{*r, ins, plan.bound.node_types.at(r), counter};
                env[gc.out_slots[0]] =
                    epilogue_reference(g, ref::kernel_for(r->op())(ctx), plan, env, counter);
                return;
            }
            const TensorType& t = plan.bound.types[gc.out_slots[0]];
            const int acc = accumulated_slot(g);
            const int donor = gc.donor.empty() ? -1 : gc.donor[0];
            Array out;
            if (acc >= 0)
                out = accumulator(g, gc, acc, plan, env);
            else if (donor >= 0 && takes_donor(plan, env[size_t(donor)], gc.out_slots[0], t))
                out = env[size_t(donor)]; // (Note [Kernel outputs in dying inputs' buffers])
            else
                out = buffer(plan, gc.out_slots[0], t);
            std::vector<const Array*> ins;
            for (size_t i = 0; i < r->num_inputs(); ++i) {
                auto it = plan_.slot_of.find(r->input(i).get());
                ins.push_back(it != plan_.slot_of.end() ? &env[it->second] : nullptr);
            }
            const int ws = plan.code[si].workspace;
            // (the call holds the variable's lock: nobody writes it until the commit)
            if (detail::VariableState* v = plan.code[si].weights_var)
                plan.code[si].folded.weights_version = v->current_version();
            run_window(*plan.code[si].window, ins, out, post_operands(g, env),
                       ws >= 0 ? &plan.workspaces[size_t(ws)] : nullptr, &plan.code[si].folded,
                       &plan.code[si].memories);
            env[gc.out_slots[0]] = std::move(out);
            return;
        }
        case Group::Kind::Fallback: {
            const Node* r = g.roots[0].get();
            std::vector<Array> ins = fallback_inputs(*r, env);
            if (r->is(Op::AllReduce) && opts_.overlap_collectives && dist::size() > 1) {
                // posted, not waited for (Note [Collective overlap] in ExecPlan.cpp)
                Array out = buffer(plan, gc.out_slots[0], plan.bound.types[gc.out_slots[0]]);
                ref::KernelCtx ctx{*r, ins, plan.bound.types[gc.out_slots[0]], counter};
                // (the first post checks every rank posts the same ones, in one exchange: Note
                // [Collective signatures] in src/dist/Comm.cpp)
                const auto t0 = std::chrono::steady_clock::now();
                if (!collectives_checked_)
                    check_overlapped_collectives(plan);
                pending_.push_back({gc.out_slots[0], out, ref::start_all_reduce(ctx, out, true)});
                stats_.collective_wait_ms +=
                    ms_since(t0);
                env[gc.out_slots[0]] = std::move(out);
                return;
            }
            if (r->is(Op::AllReduce)) { // waited for here: the time it takes is waiting
                const auto t0 = std::chrono::steady_clock::now();
                env[gc.out_slots[0]] = run_fallback(*r, ins, plan, counter);
                stats_.collective_wait_ms +=
                    ms_since(t0);
                return;
            }
            env[gc.out_slots[0]] = has_trait(r->op(), kRegion)
                                       ? region_result(*r, ins, counter)
                                       : run_fallback(*r, ins, plan, counter);
            return;
        }
        case Group::Kind::Kernel:
            run_kernel(g, gc, si, plan, env);
            return;
        }
    }

    /// Before step st (Note [Collective overlap] in ExecPlan.cpp): waits for the posted
    /// collectives it reads, or for all of them when it writes a variable in place; lets MPI
    /// move the others on.
    void await_collectives(const compiler::Step& st) {
        const bool in_place =
            std::any_of(st.inplace_var.begin(), st.inplace_var.end(), [](int v) { return v >= 0; });
        size_t keep = 0;
        for (size_t k = 0; k < pending_.size(); ++k) {
            PendingCollective& p = pending_[k];
            const bool read = in_place || std::find(st.in_slots.begin(), st.in_slots.end(),
                                                    p.slot) != st.in_slots.end();
            if (read)
                finish_one(p);
            else if (!dist::detail::progress(*p.request) && keep++ != k)
                pending_[keep - 1] = std::move(p);
        }
        pending_.resize(keep);
    }
    /// Checks with the other ranks, in one exchange, the all_reduces this call will post.
    void check_overlapped_collectives(const CallPlan& plan) {
        std::vector<dist::detail::Call> calls;
        for (const compiler::Step& st : plan_.steps)
            if (st.kind == compiler::StepKind::Fallback &&
                plan_.group(st).roots[0]->is(Op::AllReduce))
                calls.push_back(ref::all_reduce_call(*plan_.group(st).roots[0],
                                                     plan.bound.types[size_t(st.out_slots[0])]));
        std::string what = calls.at(0).what;
        if (calls.size() > 1)
            what +=
                " (and the " + std::to_string(calls.size() - 1) + " other all_reduces it posts)";
        dist::detail::check_collectives(calls, what);
        collectives_checked_ = true;
    }
    /// Waits for every posted collective.
    void finish_collectives() {
        for (auto& p : pending_)
            finish_one(p);
        pending_.clear();
    }
    void finish_one(PendingCollective& p) {
        const auto t0 = std::chrono::steady_clock::now();
        dist::detail::finish(*p.request);
        stats_.collective_wait_ms +=
            ms_since(t0);
    }

    /// The slot of the value a call's accumulating post-op adds to (Note [Accumulating
    /// post-op]), -1 if it has none.
    int accumulated_slot(const Group& g) const {
        const compiler::PostOp* p = compiler::sum_post_op(g.epilogue);
        return p ? slot(p->operand.get()) : -1;
    }

    /// The output buffer of a call with an accumulating post-op, holding the value it adds to:
    /// the variable's own buffer (in place), the value's buffer when it dies here and nobody
    /// else holds it, else a copy (Note [Accumulating post-op]). Never a buffer that the call
    /// also reads as another operand (the product's lhs, say: y = d x + d): the call would
    /// overwrite what it is still reading.
    Array accumulator(const Group& g, const compiler::Step& gc, int acc, const CallPlan& plan,
                      std::vector<Array>& env) {
        const Array& d = env[size_t(acc)];
        if (!read_otherwise(g, gc, d, env)) {
            const int var = gc.inplace_var.empty() ? -1 : gc.inplace_var[0];
            if (var >= 0 && exclusively_ours(plan, env, var)) {
                SJ_ASSERT(var == acc) << "in-place accumulation into another variable";
                return env[size_t(var)];
            }
            const bool dies =
                std::find(gc.free_after.begin(), gc.free_after.end(), acc) != gc.free_after.end();
            if (dies && sole_handle(plan, d) && !dest_of(gc.out_slots[0]))
                return d;
        }
        Array out = buffer(plan, gc.out_slots[0], plan.bound.types[gc.out_slots[0]]);
        SJ_ASSERT(out.nbytes() == d.nbytes()) << "accumulating post-op: " << out.nbytes()
                                              << " bytes of output, " << d.nbytes() << " added";
        std::memcpy(out.raw(), d.raw(), size_t(d.nbytes()));
        return out;
    }

    /// Whether a call reads d's bytes through an operand other than its sum post-op's own: a
    /// value operand or another post-op's, the same slot or a view of it.
    bool read_otherwise(const Group& g, const compiler::Step& gc, const Array& d,
                        const std::vector<Array>& env) const {
        size_t with_operand = 0, sum_at = 0;
        for (const auto& p : g.epilogue)
            if (p.operand) {
                if (p.kind == compiler::PostOp::Kind::Sum)
                    sum_at = with_operand;
                ++with_operand;
            }
        SJ_ASSERT(gc.in_slots.size() >= with_operand) << "a call's operands";
        const size_t own = gc.in_slots.size() - with_operand + sum_at;
        const auto* lo = static_cast<const char*>(d.raw());
        const auto* hi = lo + d.nbytes();
        for (size_t i = 0; i < gc.in_slots.size(); ++i) {
            if (i == own)
                continue;
            const Array& a = env[size_t(gc.in_slots[i])];
            if (!a.defined() || a.nbytes() == 0)
                continue;
            const auto* alo = static_cast<const char*>(a.raw());
            if (alo < hi && lo < alo + a.nbytes())
                return true;
        }
        return false;
    }

    /// True when no one but this call's own slots holds a's buffer (pools aside).
    static bool sole_handle(const CallPlan& plan, const Array& a) {
        return a.use_count() - plan.pool.holds(a) == 1;
    }

    /// Whether a step's output `slot` of type t may be written into `donor`, an input that
    /// dies at the step: nothing else holds its buffer, the concrete types agree, and the caller
    /// gave no place of its own for the output.
    bool takes_donor(const CallPlan& plan, const Array& donor, int slot,
                     const TensorType& t) const {
        return donor.defined() && sole_handle(plan, donor) && donor.dtype() == t.dtype &&
               donor.shape() == t.shape && !dest_of(slot);
    }

    /// The operands of a library call's post-ops (null for those without one).
    std::vector<const Array*> post_operands(const Group& g, const std::vector<Array>& env) const {
        std::vector<const Array*> ops;
        for (const auto& p : g.epilogue)
            ops.push_back(p.operand ? &env[slot(p.operand.get())] : nullptr);
        return ops;
    }

    /// The epilogue of a library call that did not apply it (the reference kernel ran, or the
    /// result is empty or had nothing to contract): its nodes' reference kernels on `value`,
    /// the call's own result.
    Array epilogue_reference(const Group& g, Array value, const CallPlan& plan,
                             const std::vector<Array>& env, uint64_t counter) const {
        std::unordered_map<const Node*, Array> memo{{g.roots[0].get(), std::move(value)}};
        std::function<Array(const Node*)> eval = [&](const Node* n) -> Array {
            if (auto it = memo.find(n); it != memo.end())
                return it->second;
            if (auto s = plan_.slot_of.find(n);
                s != plan_.slot_of.end() && env[s->second].defined())
                return env[s->second];
            std::vector<Array> ins;
            for (size_t i = 0; i < n->num_inputs(); ++i) {
                const Node* x = n->input(i).get();
                auto s = plan_.slot_of.find(x);
                if (!detail::shape_only_input(*n, i))
                    ins.push_back(eval(x));
                else
                    ins.push_back(s != plan_.slot_of.end() ? env[s->second] : Array());
            }
            ref::KernelCtx ctx{*n, ins, plan.bound.node_types.at(n), counter};
            return memo[n] = ref::kernel_for(n->op())(ctx);
        };
        return eval(g.result(0).get());
    }

    /// The input values of a reference kernel (empty arrays for inputs that only give a shape and
    /// are not materialised).
    std::vector<Array> fallback_inputs(const Node& r, const std::vector<Array>& env) const {
        std::vector<Array> ins;
        for (const auto& i : r.inputs()) {
            auto it = plan_.slot_of.find(i.get());
            ins.push_back(it != plan_.slot_of.end() ? env[it->second] : Array());
        }
        return ins;
    }

    /// A reference kernel on the plan's (already checked) concrete output type. Inputs that only
    /// give a shape (philox's `like`) are not materialised: they get empty arrays.
    Array run_fallback(const Node& r, std::vector<Array>& ins, const CallPlan& plan,
                       uint64_t counter) {
        const TensorType& t = plan.bound.types[slot(&r)];
        if (r.is(Op::CheckIndex)) { // (its input is its result)
            check_index_values(r, ins[0]);
            return ins[0];
        }
        if (LibraryKernel k = library_kernel(r.op())) {
            Array out = buffer(plan, slot(&r), t);
            k(r, ins, out, counter);
            return out;
        }
        ref::KernelCtx ctx{r, ins, t, counter};
        return ref::kernel_for(r.op())(ctx);
    }

    void run_kernel(const Group& g, const compiler::Step& gc, size_t si, const CallPlan& plan,
                    std::vector<Array>& env) {
        const auto& L = plan.bound.steps[si].launch;
        KernelFn fn = plan.code[si].fn;
        std::vector<Array> outs;
        for (size_t k = 0; k < gc.out_slots.size(); ++k) {
            const TensorType& t = plan.bound.types[gc.out_slots[k]];
            int var = gc.inplace_var.empty() ? -1 : gc.inplace_var[k];
            int donor = gc.donor.empty() || L.spec.steps ? -1 : gc.donor[k];
            if (var >= 0 && exclusively_ours(plan, env, var))
                outs.push_back(env[var]);
            else if (donor >= 0 && takes_donor(plan, env[size_t(donor)], gc.out_slots[k], t))
                outs.push_back(env[size_t(donor)]); // (Note [Kernel outputs in dying inputs'
                                                    // buffers] in src/compiler/MemoryPlan.cpp)
            else
                outs.push_back(buffer(plan, gc.out_slots[k], t));
        }
        if (L.points == 0) {
            for (size_t k = 0; k < outs.size(); ++k)
                if (g.outputs[k].reduced)
                    fill_identity(outs[k], g.outputs[k].reduce_op);
        } else {
            std::vector<void*> bufs;
            for (int s : gc.in_slots)
                bufs.push_back(const_cast<void*>(env[s].raw()));
            for (auto& o : outs)
                bufs.push_back(o.raw());
            ThreadPool& pool = ThreadPool::get();
            const bool parallel = splits(plan.bound.steps[si]);
            int nt = parallel ? int(std::min<int64_t>(pool.threads(), L.outer)) : 1;
            if (const std::vector<ReduceChunk>& chunks = plan.code[si].chunks; !chunks.empty()) {
                // fixed chunks, whatever the thread count, each reduced into private outputs,
                // combined in chunk order (Note [Thread-count-independent sums]): of loop 0, or of
                // the batch after a few kept channel blocks (Note [Reductions split along the
                // batch])
                const size_t nc = chunks.size(), nl = gc.in_slots.size(), nb = bufs.size();
                const StepCode& sc = plan.code[si];
                std::vector<std::vector<Array>>& part = sc.partials; // (made with the plan)
                std::vector<void*>& tb = sc.chunk_bufs;
                tb.resize(nc * nb);
                for (size_t c = 0; c < nc; ++c) {
                    std::copy(bufs.begin(), bufs.end(), tb.begin() + std::ptrdiff_t(c * nb));
                    for (size_t k = 0; k < outs.size(); ++k)
                        if (g.outputs[k].reduced)
                            tb[c * nb + nl + k] = part[c][k].raw();
                }
                pool.run(int(nc), [&](int c) { // (contiguous chunks per thread)
                    const ReduceChunk& k = chunks[size_t(c)];
                    fn(tb.data() + size_t(c) * nb, (k.params.empty() ? L.params : k.params).data(),
                       k.begin, k.end);
                });
                for (size_t k = 0; k < outs.size(); ++k)
                    if (g.outputs[k].reduced)
                        combine(outs[k], part, k, g.outputs[k].reduce_op);
            } else if (const StepCode& sc = plan.code[si]; sc.packs) {
                // each piece of rows, then its packed copy while the core holds it (Note
                // [Packed weights]); the threads split the rows as below
                PackedWeight& pw = *sc.packs;
                pw.holds = 0; // from here until the commit the copy holds the new value
                const float* w = static_cast<const float*>(outs[size_t(sc.packs_out)].raw());
                float* copy = static_cast<float*>(pw.copy.raw());
                auto rows = [&](int64_t b, int64_t e) {
                    for (int64_t p = b; p < e; p += sc.pack_trips) {
                        const int64_t q = std::min(e, p + sc.pack_trips);
                        fn(bufs.data(), L.params.data(), p, q);
                        pack_rhs(w, copy, pw.K, pw.N, p * sc.pack_inner, q * sc.pack_inner);
                    }
                };
                if (nt <= 1)
                    rows(0, L.outer);
                else
                    pool.run(nt, [&](int t) { rows(L.outer * t / nt, L.outer * (t + 1) / nt); });
                pw.written = true;
            } else if (nt <= 1 || L.split_reduce) {
                fn(bufs.data(), L.params.data(), 0, L.outer);
            } else {
                // kept loop 0: each thread computes whole output points of its range
                pool.run(nt, [&](int t) {
                    int64_t b = L.outer * t / nt, e = L.outer * (t + 1) / nt;
                    fn(bufs.data(), L.params.data(), b, e);
                });
            }
        }
        for (size_t k = 0; k < gc.out_slots.size(); ++k)
            env[gc.out_slots[k]] = std::move(outs[k]);
    }

    /// The fixed chunks of a reduction kernel that splits over the team: of loop 0 when it is
    /// reduced (Note [Thread-count-independent sums]), of the first reduced loop after fewer
    /// than kReduceChunks kept trips (Note [Reductions split along the batch]); none otherwise
    /// (the threads split a kept loop 0).
    static std::vector<ReduceChunk> reduce_chunks(const compiler::KernelLaunch& L) {
        std::vector<ReduceChunk> chunks;
        if (L.split_reduce) {
            const int64_t nc = std::min(kReduceChunks, L.outer);
            for (int64_t c = 0; c < nc; ++c)
                chunks.push_back({{}, L.outer * c / nc, L.outer * (c + 1) / nc});
            return chunks;
        }
        if (L.first_reduce < 0 || L.outer >= kReduceChunks)
            return chunks;
        const size_t j = size_t(L.first_reduce), rank = size_t(L.spec.rank);
        const size_t operands = (L.params.size() - rank) / (rank + 1); // strides, then offset
        const int64_t n = L.params[j], nc = std::min(kReduceChunks, n);
        for (int64_t c = 0; nc > 1 && c < nc; ++c) {
            const int64_t b = n * c / nc, e = n * (c + 1) / nc;
            ReduceChunk k{L.params, 0, L.outer};
            k.params[j] = e - b;
            for (size_t o = 0; o < operands; ++o)
                k.params[rank + o * (rank + 1) + rank] += b * k.params[rank + o * (rank + 1) + j];
            chunks.push_back(std::move(k));
        }
        return chunks;
    }

    /// The variable's buffer is held only by its state, the call's snapshot and our environment
    /// (and our buffer pool): nobody outside can see an in-place write.
    static bool exclusively_ours(const CallPlan& plan, const std::vector<Array>& env, int var) {
        const Array& v = env[var];
        return v.use_count() - plan.pool.holds(v) <= 3;
    }

    /// The destination run_into was given for a slot's value, if any.
    const Array* dest_of(int slot) const {
        for (const auto& [s, d] : dests_)
            if (s == slot)
                return &d;
        return nullptr;
    }

    /// The output buffer of a slot: last call's if nobody else holds it, else a new one.
    Array buffer(const CallPlan& plan, int slot, const TensorType& t) const {
        if (const Array* d = dest_of(slot)) // the caller's place for this output, if it fits
            if (d->shape() == t.shape && d->dtype() == t.dtype)
                return *d;
        return plan.pool.take(size_t(plan.pool_entry[size_t(slot)]), t, [&] {
            try {
                return Array::uninitialized(t.dtype, t.shape);
            } catch (const OutOfMemoryError& e) { // say which value of the user's graph
                SJ_THROW(OutOfMemoryError)
                    << "cpu backend: the value of " << plan_.slots[size_t(slot)].node->describe()
                    << ": " << e.what();
            }
        });
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
                    // (a split reduction's op is one of the six reductions: KOutput::reduce_op)
                    if (op == Op::ReduceSum) {
                        acc += double(v);
                    } else if (op == Op::ReduceProd) {
                        acc *= double(v);
                    } else if (op == Op::ReduceMax) {
                        if constexpr (std::is_floating_point_v<T>)
                            m = (std::isnan(m) || std::isnan(v)) ? T(NAN) : std::max(m, v);
                        else
                            m = std::max(m, v);
                    } else if (op == Op::ReduceMin) {
                        if constexpr (std::is_floating_point_v<T>)
                            m = (std::isnan(m) || std::isnan(v)) ? T(NAN) : std::min(m, v);
                        else
                            m = std::min(m, v);
                    } else if (op == Op::ReduceAny) {
                        m = T(m || v);
                    } else if (op == Op::ReduceAll) {
                        m = T(m && v);
                    } else {
                        SJ_ASSERT(false) << "combine: " << op_name(op) << " is not a reduction";
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

    void check_finite(const Group& g, const compiler::Step& gc, const std::vector<Array>& env) {
        for (size_t k = 0; k < gc.out_slots.size(); ++k)
            detail::check_finite(*g.roots[k], env[gc.out_slots[k]]);
    }

    FunctionOptions opts_;
    size_t interruptible_steps_ = 0; // steps before the first in-place write may poll
    bool nested_ = false;            // a loop body: the enclosing program prints its profile
    std::vector<std::pair<int, Array>> dests_; // during run_into: (slot, where its value goes)
    /// during run_into: the all_reduces posted and not yet waited for (Note [Collective
    /// overlap] in ExecPlan.cpp), each with the buffer it writes
    std::vector<PendingCollective> pending_;
    bool collectives_checked_ = false; // during run_into: check_overlapped_collectives ran
    std::vector<RegionRun> regions_;
    std::map<detail::RegionKey, size_t> region_of_key_;
    std::unordered_map<const Node*, size_t> region_of_node_;
    compiler::ExecPlan plan_;
    std::map<std::string, CallPlan> plans_;
    /// Note [Packed weights]: by variable slot (node-based: the plans share them)
    std::unordered_map<int, PackedWeight> packed_;
    const CallPlan* last_plan_ = nullptr; // the plan of the last call, and its input shapes
    std::vector<Shape> last_shapes_;
    std::vector<Profile> prof_;
    FunctionStats stats_;
    double compile_ms_ = 0;
};

} // namespace
} // namespace sj::cpu

namespace sj::detail {
void register_cpu_backend() {
    register_backend("cpu",
                     [](const Program& p, const FunctionOptions& o) -> std::unique_ptr<Executable> {
                         return std::make_unique<cpu::CpuExecutable>(p, o);
                     });
}
} // namespace sj::detail
