#include "CpuTarget.h"

#include "../../compiler/Specialize.h"
#include "../../ops/ChannelBlocking.h"
#include "../llvm/KernelExpr.h"
#include "LayoutPass.h"
#include "PoolKernels.h"

#include <symjax/ir/Attrs.h>
#include <symjax/ir/Node.h>

#include <atomic>
#include <cstdlib>
#include <string>

namespace sj::cpu {

int64_t isa_channel_block() {
    static const int64_t b = __builtin_cpu_supports("avx512f") ? 16 : 8;
    return b;
}

namespace {

int64_t initial_channel_block() {
    const char* e = std::getenv("SJ_BLOCKED_LAYOUT");
    if (!e || !*e)
        return isa_channel_block();
    std::string v = e;
    if (v == "0")
        return 0;
    if (v == "8")
        return 8;
    if (v == "16")
        return 16;
    SJ_CHECK(v == "1", InputError)
        << "SJ_BLOCKED_LAYOUT must be 0 (off), 1 (the CPU's block), 8 or "
        << "16, got '" << v << "'";
    return isa_channel_block();
}

std::atomic<int64_t>& channel_block_setting() {
    static std::atomic<int64_t> b{initial_channel_block()};
    return b;
}

} // namespace

// The width follows the CPU: oneDNN 2.6's direct convolutions block by the f32 lanes of the ISA's
// vectors (nChw16c with AVX-512, nChw8c with AVX2), and on a block of another width it has none:
// it runs im2col GEMMs and reference pools, slower than on plain layouts (docs/performance.md,
// "Without AVX-512").
int64_t channel_block() {
    return channel_block_setting().load(std::memory_order_relaxed);
}
bool blocked_layout() {
    return channel_block() != 0;
}
int64_t set_channel_block(int64_t block) {
    SJ_CHECK(block == 0 || detail::valid_block(block), Error)
        << "set_channel_block: " << block << " (0, 8 or 16)";
    return channel_block_setting().exchange(block);
}

namespace {

class CpuTarget final : public compiler::Target {
public:
    std::string name() const override { return "cpu"; }

    /// GEMM for float dot_general (OpenBLAS / oneDNN matmul); oneDNN for f32 sliding-window ops
    /// with 1 to 3 spatial dims and the layout reorders; the rest are generated kernels or their
    /// reference kernels.
    compiler::LibraryCall library_call(const Node& n) const override {
        if (n.is(Op::DotGeneral))
            return is_float(n.dtype()) ? compiler::LibraryCall::Dot : compiler::LibraryCall::None;
        if (has_trait(n.op(), kWindow)) {
            size_t nsp = detail::logical_spatial_rank(n);
            bool dnnl = n.dtype() == DType::F32 && nsp >= 1 && nsp <= 3;
            return dnnl ? compiler::LibraryCall::Window : compiler::LibraryCall::None;
        }
        return compiler::LibraryCall::None;
    }

    /// oneDNN post-ops on f32 convolutions (channels: dim 1, or dims 1 and the last of a blocked
    /// result) and on matmuls whose rhs has one free dim (channels: the last dim, the GEMM's N).
    compiler::EpilogueRule epilogue(const Node& n) const override {
        compiler::EpilogueRule r;
        r.one_parameter_set_per_eltwise = true; // oneDNN 2.6's jit convolution
        if (n.dtype() != DType::F32)
            return r;
        size_t rank = n.shape().size();
        if (n.is(Op::Conv)) {
            r.channel_dims = {1};
            r.sum = true;
            if (detail::blocked_mask(n) & detail::kBlockedResult)
                r.channel_dims.push_back(rank - 1);
        } else if (n.is(Op::DotGeneral) && rank >= 1) {
            const auto& d = n.attr<DotAttrs>();
            size_t rhs_free =
                n.input(1)->shape().size() - d.rhs_batch.size() - d.rhs_contract.size();
            if (rhs_free == 1)
                r.channel_dims = {rank - 1};
            r.sum = true;
        }
        return r;
    }

    std::vector<NodePtr> lower(const std::vector<NodePtr>& roots,
                               compiler::RewriteStats* stats) const override {
        // statistics in one pass over their data (Note [Variance in one pass] in
        // src/compiler/Specialize.cpp), then the libraries' layouts
        std::vector<NodePtr> rs = compiler::one_pass_variances(roots, stats);
        const int64_t block = channel_block();
        // then the max pools that fuse with their input (Note [Max pools as kernels])
        return block ? pools_as_kernels(layout(rs, block, stats), stats) : rs;
    }

    int vector_lanes() const override { return 16; } // AVX-512: 16 f32 per vector
    /// Max-pool backward reads its x only to make the forward's workspace (paired with the
    /// forward, not at all), before it writes dx (run_window in Conv.cpp).
    bool writes_over_input(const Node& n, size_t i) const override {
        return n.is(Op::MaxPoolBackward) && i == 0;
    }
    /// The f32 functions expanded inline cost more (codegen::expression_cost).
    size_t kernel_cost(Op op) const override { return codegen::expression_cost(op); }
};

} // namespace

const compiler::Target& cpu_target() {
    static const CpuTarget t;
    return t;
}

} // namespace sj::cpu
