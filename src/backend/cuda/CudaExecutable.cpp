// The cuda backend's Executable: a runner of the compiler's plan (src/compiler/ExecPlan.h) on a
// Device (a GPU, or the host emulator): generated kernels, cuBLAS GEMMs and cuDNN convolutions
// and pooling on the device, views as aliases, and everything else (reference kernels, loops,
// collectives) on the host (Note [What runs where]). Also the plugin's entry point,
// sj_backend_plugin_register().
#include "../../compiler/ExecPlan.h"
#include "../../core/Debug.h"
#include "../Backend.h"
#include "../reference/Reference.h"
#include "CudaTarget.h"
#include "Device.h"
#include "DotGemm.h"
#include "GpuKernel.h"
#include "WindowCall.h"

#include <symjax/Interrupt.h>
#include <symjax/ir/ControlFlow.h>
#include <symjax/ir/Node.h>
#include <symjax/ir/VariableState.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <iterator>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <sstream>
#include <unordered_map>

namespace sj::cuda {

using compiler::Group;

namespace {

// Note [What runs where]
// A step of the plan runs on the device when the device has code for it: a generated kernel
// (NvptxRenderer.cpp, launched with the thread map choose_launch picks for the call's shapes),
// a dot_general that one strided batched GEMM computes (DotGemm.cpp), or a convolution or
// pooling op that one cuDNN call computes (WindowCall.cpp: the target makes a Window step of
// what may fit from the node alone, and the call's shapes decide). A view aliases its source's
// buffer. Every other step runs its reference kernel on the host, as the cpu runner's
// fallbacks do: its operands are downloaded, its result uploaded when a device step reads it.
// That covers the ops without a kernel (sorts, linear algebra), collectives (MPI reads host
// memory), a dot_general whose dims do not fit one GEMM, a window op cuDNN cannot compute
// exactly (asymmetric padding, f64, ...), and loops and conditionals: ref::run_region drives them
// on the host, and their bodies are CudaExecutables of their own, so each iteration's kernels do
// run on the device (with a copy in and out per iteration: slow, until the loop driver keeps
// carries on the device). Values move lazily: a slot holds a device buffer, a host Array, or both,
// and the other copy is made the first time a step needs it, so two host steps in a row exchange
// nothing through the device.
//
// The Executable interface takes and returns host Arrays, so each call uploads its inputs and
// the variables it reads and downloads its outputs and new values. Variables that live on the
// device between calls (and in-place updates there) come later; the plan is compiled without
// in-place updates meanwhile. Nothing a call does is visible before run() returns, so a call
// that throws changes nothing (Function commits the updates afterwards).

/// Milliseconds since t0.
double ms_since(std::chrono::steady_clock::time_point t0) {
    return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

/// A block of device memory, returned to the device's caching allocator when the last value
/// holding it (a slot, the views of it) lets it go.
class DeviceBuffer {
public:
    DeviceBuffer(Device& d, size_t bytes) : dev_(d), ptr_(d.alloc(bytes)), bytes_(bytes) {}
    ~DeviceBuffer() {
        try {
            dev_.free(ptr_);
        } catch (const Error&) { // (a bug in the allocator's bookkeeping; never from a destructor)
        }
    }
    DeviceBuffer(const DeviceBuffer&) = delete;
    DeviceBuffer& operator=(const DeviceBuffer&) = delete;
    DevicePtr ptr() const { return ptr_; }
    size_t bytes() const { return bytes_; }

private:
    Device& dev_;
    DevicePtr ptr_;
    size_t bytes_;
};

// Note [Device-resident variables]
// A variable's value lives in its VariableState as a host Array, which Function commits after
// each call. The runner keeps, per device, the device copy of each variable's value that a call
// produced (an update) or uploaded, together with a handle on that host Array: while the
// variable still holds that very buffer (the call's snapshot shares it), the device copy is
// current and is not uploaded again. The handle keeps the buffer alive, so no other array can
// take its address, and it counts as a holder, so the cpu backend never writes the buffer in
// place behind the copy's back (exclusively_ours in CpuExecutable.cpp); assign() and checkpoint
// loads replace the buffer rather than write it. New values still go to the host after each
// call (Function commits host arrays): what this saves is the upload, half of a training
// step's host-device traffic. A dead variable's entry goes when its state expires.
class VariableMirrors {
public:
    /// The device copy of `host`, the value of variable `s`, or null.
    std::shared_ptr<DeviceBuffer> find(const detail::VariableState* s, const Array& host) {
        std::lock_guard<std::mutex> lock(mu_);
        auto it = m_.find(s);
        if (it == m_.end() || it->second.state.expired() || !it->second.host.shares_buffer(host) ||
            it->second.host.nbytes() != host.nbytes())
            return nullptr;
        return it->second.buf;
    }
    void put(const std::shared_ptr<detail::VariableState>& s, Array host,
             std::shared_ptr<DeviceBuffer> buf) {
        std::lock_guard<std::mutex> lock(mu_);
        if (!m_.count(s.get())) // a new variable: first drop the dead ones' device memory
            for (auto it = m_.begin(); it != m_.end();)
                it = it->second.state.expired() ? m_.erase(it) : std::next(it);
        m_[s.get()] = Entry{s, std::move(host), std::move(buf)};
    }
    /// The mirrors of device `d`: one table per device for the process, shared by every
    /// function (a training step and an evaluation read the same variables). The table keeps
    /// its device alive, and is never destroyed: its buffers must not outlive the device.
    static VariableMirrors& of(const std::shared_ptr<Device>& d) {
        static std::mutex mu;
        static auto* tables =
            new std::unordered_map<const Device*, std::unique_ptr<VariableMirrors>>;
        std::lock_guard<std::mutex> lock(mu);
        auto& t = (*tables)[d.get()];
        if (!t) {
            t = std::make_unique<VariableMirrors>();
            t->device_ = d;
        }
        return *t;
    }

private:
    std::shared_ptr<Device> device_;
    struct Entry {
        std::weak_ptr<detail::VariableState> state;
        Array host;
        std::shared_ptr<DeviceBuffer> buf;
    };
    std::mutex mu_;
    std::unordered_map<const detail::VariableState*, Entry> m_;
};

/// A slot's value during a call: on the device, on the host, or both (Note [What runs where]).
struct Value {
    std::shared_ptr<DeviceBuffer> buf;
    Array host;
};

/// What the runner made of one step for the shapes of a call.
struct StepCode {
    GpuLaunch launch;                     // kernel steps with points
    std::shared_ptr<DeviceKernel> kernel; // ... and their code, loaded on the device
    std::shared_ptr<DeviceKernel> combine; // a split reduction's second launch (launch.combine)
    std::optional<GemmArgs> gemm;         // dot steps that one GEMM computes (no addresses yet)
    std::optional<WindowCall> window;     // window steps that one device call computes
    bool on_host = false;                 // the step runs its reference kernel on the host
};

/// The plan bound to one input-shape signature, and its code.
struct CallPlan {
    compiler::BoundPlan bound;
    std::vector<StepCode> code; // per step
};

struct Profile {
    double ms = 0;
    int64_t calls = 0;
};

class CudaExecutable final : public detail::Executable {
public:
    CudaExecutable(const detail::Program& p, const FunctionOptions& o, std::shared_ptr<Device> d)
        : opts_(o), device_(std::move(d)) {
        const auto t0 = std::chrono::steady_clock::now();
        // no in-place updates: the variables' buffers are this call's uploaded copies (Note
        // [What runs where])
        plan_ = compiler::compile(p, cuda_target(), {false, o.nan_guard});
        const compiler::FusionPlan& fp = plan_.compiled.plan;
        stats_.nodes = plan_.order.size();
        stats_.kernels = fp.kernels();
        stats_.library_calls = fp.library_calls();
        stats_.post_ops = fp.post_ops();
        for (const compiler::Step& st : plan_.steps)
            SJ_ASSERT(plan_.group(st).epilogue.empty())
                << "cuda runner: a library call with an epilogue (the cuda target declines them)";
        for (const Node* n : plan_.order)
            if (has_trait(n->op(), kRegion))
                add_region_node(*n);
        const_bufs_.resize(plan_.slots.size());
        if (detail::debug_level() >= 1)
            std::fprintf(stderr,
                         "[symjax] cuda: compiled graph for %s: %zu nodes -> %zu steps (%zu "
                         "kernels, %zu library calls) in %.1f ms\n",
                         device_->info().name.c_str(), plan_.order.size(), plan_.steps.size(),
                         stats_.kernels, stats_.library_calls, ms_since(t0));
    }

    ~CudaExecutable() override {
        if (opts_.profile && !nested_)
            std::fprintf(stderr, "%s", profile_report().c_str());
    }

    FunctionStats stats() const override { return stats_; }
    std::string dump() const override { return plan_.compiled.plan.str(); }

    std::string profile_report() const override {
        std::ostringstream os;
        os << "[symjax] cuda profile on " << device_->info().name << " (" << prof_.size()
           << " steps; each timed to its end: the device waits after every step)\n";
        char line[256];
        std::snprintf(line, sizeof line, "  %-4s %-10s %10s %8s  %s\n", "#", "kind", "ms/call",
                      "calls", "root");
        os << line;
        for (size_t i = 0; i < prof_.size(); ++i) {
            const Profile& p = prof_[i];
            if (!p.calls)
                continue;
            const Group& g = plan_.group(plan_.steps[i]);
            std::snprintf(line, sizeof line, "  %-4zu %-10s %10.4f %8lld  %s\n", i,
                          compiler::kind_name(g.kind), p.ms / double(p.calls),
                          static_cast<long long>(p.calls), g.roots[0]->describe(1).c_str());
            os << line;
        }
        return os.str();
    }

    detail::ExecResult run(const std::vector<Array>& inputs, const std::vector<Array>& vals,
                           uint64_t counter) override {
        const CallPlan& plan = plan_for(inputs);
        // Device::upload needs its host bytes until the next synchronize(): the host arrays and
        // argument blocks a call uploads are kept here, and a call that throws still waits for
        // the device before dropping them (the guard is destroyed first).
        Call call{*this, plan, counter};
        struct Drain {
            Device& d;
            ~Drain() {
                try {
                    d.synchronize();
                } catch (const Error&) { // the error that unwinds us stands
                }
            }
        } drain{*device_};
        call.env.resize(plan_.slots.size());
        for (size_t s = 0; s < plan_.slots.size(); ++s) {
            const compiler::Slot& sl = plan_.slots[s];
            Value& v = call.env[s];
            switch (sl.source) {
            case compiler::SlotSource::Input:
                v.host = inputs[size_t(sl.index)];
                break;
            case compiler::SlotSource::Variable:
                v.host = vals[size_t(sl.index)];
                v.buf = mirrors_.find(state_of(size_t(sl.index)).get(), v.host);
                break;
            case compiler::SlotSource::Constant:
                v.host = sl.node->attr<ConstantAttrs>().value;
                v.buf = const_bufs_[s]; // uploaded by the first call that needed it
                break;
            case compiler::SlotSource::RngCounter:
                v.host = Array::scalar<int64_t>(int64_t(counter));
                break;
            case compiler::SlotSource::Step:
                break;
            }
        }
        if (prof_.size() != plan_.steps.size())
            prof_.assign(plan_.steps.size(), {});
        stats_.collective_wait_ms = 0;
        for (auto& g : regions_)
            g.results.clear();
        for (size_t si = 0; si < plan_.steps.size(); ++si) {
            const compiler::Step& st = plan_.steps[si];
            const Group& g = plan_.group(st);
            // (a loop's body does not poll: the loop driver polls before each iteration)
            if (!nested_ && poll_interrupt())
                SJ_THROW(Interrupted)
                    << "interrupted before step " << si << " of " << plan_.steps.size() << " ("
                    << g.roots[0]->describe(1) << "); no variable was changed";
            const bool timed = opts_.profile || detail::debug_level() >= 2;
            const auto t0 =
                timed ? std::chrono::steady_clock::now() : std::chrono::steady_clock::time_point{};
            execute(call, g, st, si);
            if (timed) {
                device_->synchronize();
                const double ms = ms_since(t0);
                prof_[si].ms += ms;
                ++prof_[si].calls;
                if (detail::debug_level() >= 2)
                    std::fprintf(stderr, "[symjax] cuda step %zu %s (%s): %.3f ms\n", si,
                                 g.roots[0]->describe(1).c_str(), kind_of(plan, si), ms);
            }
            if (opts_.nan_guard)
                for (size_t k = 0; k < st.out_slots.size(); ++k)
                    detail::check_finite(*g.roots[k], call.host_of(st.out_slots[k]));
            for (int s : st.free_after)
                call.env[size_t(s)] = Value{};
        }
        for (auto& g : regions_)
            g.results.clear();
        detail::ExecResult r;
        for (int s : plan_.output_slots) {
            const Node* n = plan_.slots[size_t(s)].node;
            Array a = call.host_of(s);
            // a variable or constant returned as an output must not alias its buffer (updates
            // may write the variable's)
            if (n->is(Op::Variable) || n->is(Op::Constant))
                a = a.clone();
            r.outputs.push_back(std::move(a));
        }
        for (size_t k = 0; k < plan_.update_slots.size(); ++k) {
            const int s = plan_.update_slots[k];
            r.new_values.push_back(call.host_of(s));
            if (auto& buf = call.env[size_t(s)].buf) // (Note [Device-resident variables])
                mirrors_.put(state_of(plan_.program.updates[k].first), r.new_values.back(), buf);
        }
        device_->synchronize(); // (a failure queued after the last download surfaces here)
        return r;
    }

private:
    /// One call's values, and what it must keep alive until the device has read it.
    struct Call {
        Call(CudaExecutable& e, const CallPlan& p, uint64_t c) : exe(e), plan(p), counter(c) {}
        CudaExecutable& exe;
        const CallPlan& plan;
        uint64_t counter;
        std::vector<Array> uploaded;                   // host arrays queued for upload
        std::vector<std::vector<uint64_t>> arg_blocks; // kernels' argument blocks, ditto
        std::vector<Value> env;                        // per slot (destroyed first)

        const TensorType& type(int s) const { return plan.bound.types[size_t(s)]; }

        /// A new device buffer for slot s's value.
        std::shared_ptr<DeviceBuffer> new_buffer(int s) {
            const TensorType& t = type(s);
            try {
                return std::make_shared<DeviceBuffer>(
                    *exe.device_, size_t(numel(t.shape)) * size_t(dtype_size(t.dtype)));
            } catch (const OutOfMemoryError& e) { // say which value of the user's graph
                SJ_THROW(OutOfMemoryError)
                    << "cuda backend: the value of " << exe.plan_.slots[size_t(s)].node->describe()
                    << " " << type_str(t) << ": " << e.what();
            }
        }

        /// Slot s's device address, uploading its host value first if it has none.
        DevicePtr device_of(int s) {
            Value& v = env[size_t(s)];
            if (!v.buf) {
                SJ_ASSERT(v.host.defined()) << "cuda runner: slot " << s << " ("
                                            << exe.plan_.slots[size_t(s)].node->describe()
                                            << ") read before it was computed";
                v.buf = new_buffer(s);
                exe.device_->upload(v.buf->ptr(), v.host.raw(), size_t(v.host.nbytes()));
                uploaded.push_back(v.host);
                const compiler::Slot& sl = exe.plan_.slots[size_t(s)];
                if (sl.source == compiler::SlotSource::Constant)
                    exe.const_bufs_[size_t(s)] = v.buf; // constants stay on the device
                if (sl.source == compiler::SlotSource::Variable) // so do variables
                    exe.mirrors_.put(exe.state_of(size_t(sl.index)), v.host, v.buf);
            }
            return v.buf->ptr();
        }

        /// Slot s's value on the host, downloading it first if it has none.
        const Array& host_of(int s) {
            Value& v = env[size_t(s)];
            if (!v.host.defined()) {
                SJ_ASSERT(v.buf) << "cuda runner: slot " << s << " ("
                                 << exe.plan_.slots[size_t(s)].node->describe()
                                 << ") read before it was computed";
                Array a = Array::uninitialized(type(s).dtype, type(s).shape);
                exe.device_->download(a.raw(), v.buf->ptr(), size_t(a.nbytes()));
                v.host = std::move(a);
            }
            return v.host;
        }

        /// Slot s computed on the host: its value is `a` (uploaded when a device step reads it).
        void set_host(int s, Array a) { env[size_t(s)] = Value{nullptr, std::move(a)}; }
    };

    /// The plan bound to the shapes of `inputs`: made on the first call with these shapes.
    const CallPlan& plan_for(const std::vector<Array>& inputs) {
        std::string sig; // each shape's rank and dims, as bytes
        for (const auto& a : inputs) {
            const int64_t rank = a.rank();
            sig.append(reinterpret_cast<const char*>(&rank), sizeof rank);
            sig.append(reinterpret_cast<const char*>(a.shape().data()),
                       sizeof(int64_t) * size_t(rank));
        }
        auto it = plans_.find(sig);
        if (it == plans_.end())
            it = plans_.emplace(sig, make_plan(inputs)).first;
        return it->second;
    }

    /// Binds the shapes of one call (compiler::bind: concrete types, checked before anything
    /// runs; each kernel's loops) and makes its code: each kernel's launch for this device, its
    /// code loaded there, and each dot's GEMM.
    CallPlan make_plan(const std::vector<Array>& inputs) {
        CallPlan plan;
        std::vector<TensorType> in;
        for (const auto& a : inputs)
            in.push_back({a.dtype(), a.shape()});
        plan.bound = compiler::bind(plan_, in);
        const auto& types = plan.bound.node_types;
        plan.code.resize(plan_.steps.size());
        for (size_t si = 0; si < plan_.steps.size(); ++si) {
            const compiler::Step& st = plan_.steps[si];
            const Group& g = plan_.group(st);
            StepCode& sc = plan.code[si];
            switch (st.kind) {
            case compiler::StepKind::Kernel: {
                const compiler::KernelLaunch& l = plan.bound.steps[si].launch;
                if (detail::debug_level() >= 4)
                    std::fprintf(stderr, "[symjax] cuda kernel %zu IR:\n%s", si,
                                 l.spec.str().c_str());
                if (l.points == 0)
                    break; // nothing to launch (run_kernel fills reductions' identities)
                sc.launch = choose_launch(l, device_->info().limits);
                sc.kernel = device_->load(sc.launch.kernel);
                if (sc.launch.kernel.phase == GpuPhase::Partials)
                    sc.combine = device_->load(sc.launch.combine);
                if (detail::debug_level() >= 2)
                    std::fprintf(
                        stderr, "[symjax] cuda step %zu launch: %s grid %lld%s\n", si,
                        sc.launch.kernel.str().c_str(), (long long)sc.launch.grid,
                        sc.combine
                            ? (" + combine grid " + std::to_string(sc.launch.combine_grid)).c_str()
                            : "");
                break;
            }
            case compiler::StepKind::Dot: {
                const Node* r = g.roots[0].get();
                const TensorType &lt = types.at(r->input(0).get()),
                                 &rt = types.at(r->input(1).get()), &ot = types.at(r);
                if (lt.dtype == ot.dtype && rt.dtype == ot.dtype)
                    sc.gemm = gemm_for(r->attr<DotAttrs>(), lt.shape, rt.shape, ot.dtype);
                sc.on_host = !sc.gemm;
                if (sc.on_host && detail::debug_level() >= 1)
                    std::fprintf(stderr,
                                 "[symjax] cuda: %s runs on the host: its dims do not fit one "
                                 "strided batched GEMM (%s x %s)\n",
                                 r->describe(1).c_str(), type_str(lt).c_str(),
                                 type_str(rt).c_str());
                break;
            }
            case compiler::StepKind::Window: {
                const Node* r = g.roots[0].get();
                std::vector<TensorType> operands;
                for (const auto& i : r->inputs())
                    operands.push_back(types.at(i.get()));
                std::string why;
                sc.window = window_call_for(*r, operands, types.at(r), &why);
                sc.on_host = !sc.window;
                if (sc.on_host && detail::debug_level() >= 1)
                    std::fprintf(stderr, "[symjax] cuda: %s runs on the host: %s\n",
                                 r->describe(1).c_str(), why.c_str());
                break;
            }
            case compiler::StepKind::Fallback:
                sc.on_host = true;
                break;
            case compiler::StepKind::View:
                break;
            }
        }
        stats_.intermediate_bytes = plan.bound.intermediate_bytes;
        stats_.peak_arena_bytes = plan.bound.peak_bytes;
        return plan;
    }

    static const char* kind_of(const CallPlan& plan, size_t si) {
        return plan.code[si].on_host ? "host" : "device";
    }

    int slot(const Node* n) const { return plan_.slot_of.at(n); }

    void execute(Call& call, const Group& g, const compiler::Step& st, size_t si) {
        const StepCode& code = call.plan.code[si];
        if (code.on_host) {
            run_on_host(call, g, st);
            return;
        }
        switch (g.kind) {
        case Group::Kind::View: {
            // an alias of the source's buffer (and of its host copy, if it has one)
            const Value& src = call.env[size_t(slot(g.roots[0]->input(0).get()))];
            const Shape& shape = call.type(st.out_slots[0]).shape;
            call.env[size_t(st.out_slots[0])] =
                Value{src.buf, src.host.defined() ? src.host.reshape(shape) : Array()};
            return;
        }
        case Group::Kind::Dot:
            run_gemm(call, g, st, *code.gemm);
            return;
        case Group::Kind::Kernel:
            run_kernel(call, g, st, si);
            return;
        case Group::Kind::Window:
            run_window(call, g, st, *code.window);
            return;
        case Group::Kind::Fallback:
            break;
        }
        SJ_THROW(InternalError) << "cuda runner: a " << compiler::kind_name(g.kind)
                                << " step that is not marked to run on the host";
    }

    void run_kernel(Call& call, const Group& g, const compiler::Step& st, size_t si) {
        const compiler::KernelLaunch& l = call.plan.bound.steps[si].launch;
        const StepCode& code = call.plan.code[si];
        std::vector<uint64_t> block; // the buffer table (loads, then outputs), then the params
        for (int s : st.in_slots)
            block.push_back(l.points ? call.device_of(s) : 0);
        for (size_t k = 0; k < st.out_slots.size(); ++k) {
            const int s = st.out_slots[k];
            Value& v = call.env[size_t(s)];
            v = Value{call.new_buffer(s), Array()};
            block.push_back(v.buf->ptr());
            if (l.points == 0 && g.outputs[k].reduced) {
                // a reduction over nothing: its identity (as the cpu runner fills it)
                const Op op = g.outputs[k].reduce_op;
                const double id = op == Op::ReduceProd || op == Op::ReduceAll ? 1.0 : 0.0;
                const TensorType& t = call.type(s);
                v.host = Array::full(t.dtype, t.shape, id);
                device_->upload(v.buf->ptr(), v.host.raw(), size_t(v.host.nbytes()));
                call.uploaded.push_back(v.host);
            }
        }
        if (l.points == 0)
            return;
        // a split reduction's partials (Note [Split reductions] in NvptxRenderer.cpp): the
        // table's entry after the outputs; freed like the argument block below
        std::optional<DeviceBuffer> scratch;
        if (code.launch.scratch_bytes > 0) {
            scratch.emplace(*device_, size_t(code.launch.scratch_bytes));
            block.push_back(scratch->ptr());
        }
        const size_t table = block.size();
        block.resize(table + l.params.size());
        std::memcpy(block.data() + table, l.params.data(), l.params.size() * sizeof(int64_t));
        // one small block per launch, freed at once: the next launch's block, which may reuse
        // it, is written on the same stream after this kernel has read it (Note [One stream])
        DeviceBuffer args(*device_, block.size() * sizeof(uint64_t));
        device_->upload(args.ptr(), block.data(), block.size() * sizeof(uint64_t));
        call.arg_blocks.push_back(std::move(block));
        device_->launch(*code.kernel, code.launch.grid, code.launch.block, args.ptr(),
                        args.ptr() + table * sizeof(uint64_t));
        if (code.combine)
            device_->launch(*code.combine, code.launch.combine_grid, code.launch.combine.block,
                            args.ptr(), args.ptr() + table * sizeof(uint64_t));
    }

    void run_gemm(Call& call, const Group& g, const compiler::Step& st, GemmArgs gemm) {
        const Node* r = g.roots[0].get();
        const int out = st.out_slots[0];
        Value& v = call.env[size_t(out)];
        v = Value{call.new_buffer(out), Array()};
        if (gemm.m == 0 || gemm.n == 0 || gemm.batch == 0)
            return;        // an empty result
        if (gemm.k == 0) { // sums of nothing
            const TensorType& t = call.type(out);
            v.host = Array(t.dtype, t.shape);
            device_->upload(v.buf->ptr(), v.host.raw(), size_t(v.host.nbytes()));
            call.uploaded.push_back(v.host);
            return;
        }
        gemm.b = call.device_of(slot(r->input(0).get())); // (gemm_for: b is the lhs, a the rhs)
        gemm.a = call.device_of(slot(r->input(1).get()));
        gemm.c = v.buf->ptr();
        device_->gemm(gemm);
    }

    void run_window(Call& call, const Group& g, const compiler::Step& st, const WindowCall& w) {
        const Node* r = g.roots[0].get();
        const int out = st.out_slots[0];
        // (window_call_for declines empty tensors, and `like` inputs, last, are not operands)
        const DevicePtr a = call.device_of(slot(r->input(0).get()));
        const bool two = w.kind != WindowKind::Pool && w.kind != WindowKind::AvgPoolBackward;
        const DevicePtr b = two ? call.device_of(slot(r->input(1).get())) : 0;
        Value& v = call.env[size_t(out)];
        v = Value{call.new_buffer(out), Array()};
        device_->window(w, a, b, v.buf->ptr());
    }

    /// The step's reference kernel (or its region, or its collective) on the host (Note [What
    /// runs where]).
    void run_on_host(Call& call, const Group& g, const compiler::Step& st) {
        const Node* r = g.roots[0].get();
        std::vector<Array> ins;
        for (const auto& i : r->inputs()) {
            // inputs that only give a shape (philox's `like`) are not materialised
            auto it = plan_.slot_of.find(i.get());
            ins.push_back(it != plan_.slot_of.end() ? call.host_of(it->second) : Array());
        }
        const int out = st.out_slots[0];
        if (has_trait(r->op(), kRegion)) {
            call.set_host(out, region_result(*r, ins, call.counter));
            return;
        }
        const auto t0 = std::chrono::steady_clock::now();
        ref::KernelCtx ctx{*r, ins, call.type(out), call.counter};
        call.set_host(out, ref::kernel_for(r->op())(ctx));
        if (r->is(Op::AllReduce)) // waited for here: the time it takes is waiting
            stats_.collective_wait_ms += ms_since(t0);
    }

    // ---- control flow (Note [Structured ops] in src/ops/ControlFlow.cpp) ----
    /// A region's nodes in this plan: which results they ask for, its bodies compiled once as
    /// executables of their own, and its results in the current call.
    struct RegionRun {
        std::vector<bool> wanted;
        std::unique_ptr<CudaExecutable> body[2];
        std::vector<Array> results;
    };

    void add_region_node(const Node& n) {
        const detail::Region& r = *n.attr<RegionAttrs>().region;
        auto [it, fresh] = region_of_key_.emplace(detail::region_key(n), regions_.size());
        if (fresh) {
            RegionRun g;
            g.wanted.assign(size_t(r.num_results()), false);
            g.body[0] =
                std::make_unique<CudaExecutable>(detail::body_program(r.body), opts_, device_);
            if (r.kind != detail::RegionKind::Scan)
                g.body[1] =
                    std::make_unique<CudaExecutable>(detail::body_program(r.body2), opts_, device_);
            for (auto& b : g.body)
                if (b)
                    b->nested_ = true;
            regions_.push_back(std::move(g));
        }
        regions_[it->second].wanted[size_t(n.attr<RegionAttrs>().output)] = true;
        region_of_node_[&n] = it->second;
    }

    /// n's value: its region, run once per call (on the host, each body's steps on the device)
    /// for every result this plan asks for.
    Array region_result(const Node& n, const std::vector<Array>& in, uint64_t counter) {
        RegionRun& g = regions_[region_of_node_.at(&n)];
        if (g.results.empty()) {
            ref::BodyRunner run = [&](int which, const std::vector<Array>& args,
                                      const std::vector<Array>*) {
                return g.body[which]->run(args, {}, counter).outputs;
            };
            g.results = ref::run_region(n, in, g.wanted, run);
        }
        return g.results[size_t(n.attr<RegionAttrs>().output)];
    }

    FunctionOptions opts_;
    std::shared_ptr<Device> device_;
    bool nested_ = false; // a loop body: the loop polls for interrupts, the parent prints
    compiler::ExecPlan plan_;
    std::map<std::string, CallPlan> plans_;
    /// constants' device buffers, per slot, uploaded once (null until a call needs one there)
    std::vector<std::shared_ptr<DeviceBuffer>> const_bufs_;
    VariableMirrors& mirrors_ = VariableMirrors::of(device_);

    /// The state of Program::variables[i].
    const std::shared_ptr<detail::VariableState>& state_of(size_t i) const {
        return plan_.program.variables[i]->attr<VariableAttrs>().state;
    }
    std::vector<RegionRun> regions_;
    std::map<detail::RegionKey, size_t> region_of_key_;
    std::unordered_map<const Node*, size_t> region_of_node_;
    std::vector<Profile> prof_;
    FunctionStats stats_;
};

} // namespace

/// The backend's factory: the device first, so that asking for "cuda" on a machine without a
/// driver fails here, before any compiling, with the message that says what to do.
std::unique_ptr<detail::Executable> make_cuda(const detail::Program& p, const FunctionOptions& o) {
    std::shared_ptr<Device> d = open_device();
    return std::make_unique<CudaExecutable>(p, o, std::move(d));
}

} // namespace sj::cuda

/// The plugin's entry point (Note [Backend plugins] in src/backend/Registry.cpp): the registry
/// calls it once after loading libsymjax_cuda.so.
extern "C" __attribute__((visibility("default"))) void sj_backend_plugin_register() {
    sj::detail::register_backend("cuda", sj::cuda::make_cuda);
}
