// oneDNN engine and thread count (Debian's oneDNN runs on GNU OpenMP).
#include "Dnnl.h"

#include <symjax/ir/Node.h>

#include "ThreadPool.h"

#include <omp.h>

#include <cstdio>
#include <utility>

namespace sj::cpu {

const dnnl::engine& dnnl_engine() {
    static const dnnl::engine e(dnnl::engine::kind::cpu, 0);
    return e;
}

void match_dnnl_threads() {
    // OpenMP's thread count is per calling thread (its nthreads-var ICV)
    thread_local int set = 0;
    int n = ThreadPool::get().threads();
    if (set != n) {
        omp_set_num_threads(n);
        set = n;
    }
}

OneDnnlThread::OneDnnlThread() : previous_(omp_get_max_threads()) {
    omp_set_num_threads(1);
}

OneDnnlThread::~OneDnnlThread() {
    omp_set_num_threads(previous_);
}

namespace {

/// The operand of a binary post-op as oneDNN takes it: [1, C, 1...] (the channel dim) or all 1.
dnnl::memory::desc post_operand_desc(const compiler::PostOp& p, const ChannelDim& c) {
    dnnl::memory::dims d(size_t(c.rank), 1);
    if (p.per_channel) d[size_t(c.dim)] = c.channels;
    dnnl::memory::dims strides(d.size(), 1);
    for (int i = c.rank - 2; i >= 0; --i)
        strides[size_t(i)] = strides[size_t(i) + 1] * d[size_t(i) + 1];
    return dnnl::memory::desc(d, dnnl::memory::data_type::f32, strides);
}

dnnl::algorithm binary_algorithm(Op op) {
    // a table, not a switch: most ops have no binary post-op, and a new op needs no entry here
    static constexpr std::pair<Op, dnnl::algorithm> kBinary[] = {
        {Op::Add, dnnl::algorithm::binary_add}, {Op::Sub, dnnl::algorithm::binary_sub},
        {Op::Mul, dnnl::algorithm::binary_mul}, {Op::Max, dnnl::algorithm::binary_max},
        {Op::Min, dnnl::algorithm::binary_min},
    };
    for (const auto& [o, alg] : kBinary)
        if (o == op) return alg;
    SJ_ASSERT(false) << "no binary post-op for " << op_name(op);
    return dnnl::algorithm::undef;
}

} // namespace

void set_post_ops(dnnl::primitive_attr& attr, const std::vector<compiler::PostOp>& epilogue,
                  const ChannelDim& c, size_t first) {
    if (epilogue.size() <= first) return;
    dnnl::post_ops ops;
    for (size_t i = first; i < epilogue.size(); ++i) {
        const compiler::PostOp& p = epilogue[i];
        using K = compiler::PostOp::Kind;
        switch (p.kind) {
        case K::Binary: ops.append_binary(binary_algorithm(p.op), post_operand_desc(p, c)); break;
        case K::Relu:
            ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, float(p.alpha), 0.f);
            break;
        case K::Linear:
            ops.append_eltwise(1.f, dnnl::algorithm::eltwise_linear, float(p.alpha),
                               float(p.beta));
            break;
        case K::Sum:
            ops.append_sum(float(p.alpha));
            break; // Note [Accumulating post-op]
        }
    }
    attr.set_post_ops(ops);
}

// Note [Affine prefix]
// oneDNN 2.6's jit convolution pays for each binary post-op about what a separate pass over
// the result costs (conv 32->32, 32x32, batch 32, 1 thread: 4.0 ms plain or with bias and relu,
// 4.4 with one per-channel binary post-op, 5.3 with four: the standalone measurement in
// docs/performance.md "Epilogue fusion"), while its bias and an eltwise relu are free. So the
// leading per-channel affine steps of an epilogue (a bias add; eval batch norm's sub, mul, mul,
// add) are not given as post-ops: each call folds them into y = scale[c] * x + shift[c] (C
// values, computed from the operands' buffers), passes shift as the call's bias and, when
// some step multiplies, scales the weights' rows by scale (batch norm folding; the operands may
// change between calls, so the call site keeps the folded weights with the bytes they were
// made from and makes them again when those differ: Note [Folded weights cache] in Conv.cpp). A
// matmul takes only the shift (scaling its weights would copy K x N floats). The remaining post-ops
// (relu, and whatever follows a step that is not affine) stay.
size_t affine_prefix(const std::vector<compiler::PostOp>& epilogue, bool scale) {
    using K = compiler::PostOp::Kind;
    size_t n = 0;
    for (const auto& p : epilogue) {
        bool affine = (p.kind == K::Binary && (p.op == Op::Add || p.op == Op::Sub ||
                                               (scale && p.op == Op::Mul))) ||
                      (p.kind == K::Linear && (scale || p.alpha == 1));
        if (!affine) break;
        ++n;
    }
    return n;
}

void affine_of(const std::vector<compiler::PostOp>& epilogue, size_t n,
               const std::vector<const Array*>& operands, int64_t channels, float* scale,
               float* shift) {
    for (int64_t c = 0; c < channels; ++c) {
        // in f32, step by step, as the ops would round
        float s = 1, t = 0;
        for (size_t i = 0; i < n; ++i) {
            const compiler::PostOp& p = epilogue[i];
            if (p.kind == compiler::PostOp::Kind::Linear) {
                s *= float(p.alpha);
                t = t * float(p.alpha) + float(p.beta);
                continue;
            }
            const float* v = static_cast<const float*>(operands[i]->raw());
            float x = v[p.per_channel ? c : 0];
            if (p.op == Op::Add) t += x;
            if (p.op == Op::Sub) t -= x;
            if (p.op == Op::Mul) s *= x, t *= x;
        }
        scale[c] = s;
        shift[c] = t;
    }
}

std::string post_ops_key(const std::vector<compiler::PostOp>& epilogue) {
    std::string k;
    char buf[96];
    for (const auto& p : epilogue) {
        std::snprintf(buf, sizeof buf, "|%d %s %d %a %a", int(p.kind), op_name(p.op),
                      int(p.per_channel), p.alpha, p.beta);
        k += buf;
    }
    return k;
}

void add_post_op_args(ExecArgs& args, KeptMemories& kept,
                      const std::vector<compiler::PostOp>& epilogue,
                      const std::vector<const Array*>& operands, const ChannelDim& c,
                      size_t first) {
    for (size_t i = first; i < epilogue.size(); ++i) {
        if (epilogue[i].kind != compiler::PostOp::Kind::Binary) continue;
        SJ_ASSERT(i < operands.size() && operands[i]) << "post-op " << i << " has no operand";
        const int id = DNNL_ARG_ATTR_MULTIPLE_POST_OP(int(i - first)) | DNNL_ARG_SRC_1;
        args.add(id, kept.at(id, const_cast<void*>(operands[i]->raw()),
                             [&] { return post_operand_desc(epilogue[i], c); }));
    }
}

// Note [Call arguments kept]
// A library call handed oneDNN a new memory object per argument, in a map that execute() turned
// into a vector, on a stream made for the call. Cheap on hot caches (~1 us for a matmul's four
// arguments), but inside a training step every call finds oneDNN's code and data cold, and there
// the objects cost more than a small primitive's work. Measured (AMD EPYC, Zen 5; a 32x32x10 f32
// matmul after 64 MB of other traffic): execute alone 5.0 us, with four new memory objects and
// the map 11.6 us, with a new stream 6.6 us; in the SymJAX paper network's step its 32x32x10
// dense layer took 27-34 us a call, 2.6 us in a loop. So each call site (a step of a call plan)
// keeps its memory objects between calls (KeptMemories): made on the first call, given the new
// pointer (set_data_handle, ~0.2 us cold) only when a buffer moved, which the runner's buffers
// kept per slot rarely do; execute() takes the C API's array of arguments (ExecArgs), and a
// thread keeps one stream. A call site that runs another primitive (new shapes) drops its
// objects. Nothing computed changes: the same primitives on the same buffers.

void ExecArgs::execute(const dnnl::primitive& p, const dnnl::stream& s) const {
    dnnl::error::wrap_c_api(
        dnnl_primitive_execute(p.get(), s.get(), int(args_.size()), args_.data()),
        "could not execute a primitive");
}

void* ExecArgs::data(int id) const {
    for (const dnnl_exec_arg_t& a : args_)
        if (a.arg == id) {
            void* p = nullptr;
            dnnl::error::wrap_c_api(dnnl_memory_get_data_handle(a.memory, &p),
                                    "could not get a memory's buffer");
            return p;
        }
    return nullptr;
}

dnnl::stream& thread_stream() {
    thread_local dnnl::stream s(dnnl_engine());
    return s;
}

} // namespace sj::cpu
