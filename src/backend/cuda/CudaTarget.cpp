#include "CudaTarget.h"
#include "WindowCall.h"

#include "../llvm/KernelExpr.h"

#include <symjax/ir/Attrs.h>
#include <symjax/ir/Node.h>

namespace sj::cuda {

namespace {

class CudaTarget final : public compiler::Target {
public:
    std::string name() const override { return "cuda"; }

    /// cuBLAS for float dot_general; cuDNN for the f32 convolutions and pooling it may compute
    /// exactly (decided from the node alone: the runner asks again with the call's shapes and
    /// runs what does not fit on the host, Note [Window ops on cuDNN] in WindowCall.cpp); every
    /// other op is a generated kernel, or its reference kernel run by the runner on the host.
    compiler::LibraryCall library_call(const Node& n) const override {
        if (n.is(Op::DotGeneral) && is_float(n.dtype()))
            return compiler::LibraryCall::Dot;
        if (may_be_window_call(n))
            return compiler::LibraryCall::Window;
        return compiler::LibraryCall::None;
    }

    /// No epilogues yet: the elementwise ops after a GEMM are a kernel of their own.
    compiler::EpilogueRule epilogue(const Node&) const override { return {}; }

    /// Plain layouts: no channel blocking (that is a cpu library's preference).
    std::vector<NodePtr> lower(const std::vector<NodePtr>& roots,
                               compiler::RewriteStats*) const override {
        return roots;
    }

    /// A GPU thread computes one point: there are no vector lanes to fill, and an inner loop's
    /// trip count compiled in gains nothing.
    int vector_lanes() const override { return 1; }

    /// As on the cpu (the same inline expansions, src/backend/llvm/LlvmMath.cpp).
    size_t kernel_cost(Op op) const override { return codegen::expression_cost(op); }
};

} // namespace

const compiler::Target& cuda_target() {
    static const CudaTarget t;
    return t;
}

} // namespace sj::cuda
