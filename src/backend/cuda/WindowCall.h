// Convolutions and pooling as cuDNN takes them: the mapping from a window node with concrete
// types to one legacy cuDNN call's description, and that description run on the host by the
// reference kernels (the emulator's path). Note [Window ops on cuDNN] in WindowCall.cpp.
#pragma once

#include <symjax/DType.h>
#include <symjax/Shape.h>
#include <symjax/ir/Attrs.h>
#include <symjax/ir/Node.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace sj::cuda {

/// The window ops a device runs, one per op of Ops.def's window family (layout reorders
/// excepted: the cuda target lays nothing out).
enum class WindowKind : uint8_t {
    Conv,               // (x, w) -> y
    ConvBackwardData,   // (dy, w) -> dx
    ConvBackwardFilter, // (x, dy) -> dw
    Pool,               // (x) -> y
    MaxPoolBackward,    // (x, dy) -> dx
    AvgPoolBackward,    // (dy) -> dx
};

/// One cuDNN call: f32, NCHW (NCDHW) packed, 2 or 3 spatial dims (a 1-d op is lifted to 2-d with
/// a leading spatial dim of 1), symmetric padding.
struct WindowCall {
    WindowKind kind = WindowKind::Conv;
    /// The forward op's input [N, C, spatial...], filter [O, C / groups, k...] (convolutions;
    /// empty for pooling) and output [N, O or C, out...], whichever of them are operands or the
    /// result of this call.
    Shape x, w, y;
    /// Per spatial dim: padding on both sides, strides, dilation (convolutions; all 1 for
    /// pooling) and the window (pooling; empty for convolutions).
    std::vector<int64_t> pad, stride, dilation, window;
    int64_t groups = 1;
    PoolKind pool = PoolKind::Max;
    bool count_include_pad = true; // average pooling divides by the window size

    size_t spatial() const { return pad.size(); }
    /// Everything that picks an algorithm: the key of a device's algorithm cache.
    std::string key() const;
    /// "conv x [2,3,8,8] w [4,3,3,3] y [2,4,6,6] pad [0,0] stride [1,1] dilation [1,1] groups 1"
    std::string str() const;
};

/// The call that computes window node `n` (conv, conv_backward_data, conv_backward_filter,
/// pool, max_pool_backward, avg_pool_backward) on inputs of types `in` (one per input of n,
/// `like` inputs included and ignored) with result type `out`; nullopt, with the reason in
/// *why when given, when cuDNN cannot compute exactly what the reference kernel does (not f32,
/// asymmetric padding, 0 or more than 3 spatial dims, an empty tensor, a size over INT_MAX, a
/// channel-blocked layout). The types must be concrete.
std::optional<WindowCall> window_call_for(const Node& n, const std::vector<TensorType>& in,
                                          const TensorType& out, std::string* why = nullptr);

/// What the target can decide from n alone (its static type may have -1 dims): false when no
/// shapes could make window_call_for accept n. The runner still asks window_call_for with the
/// call's shapes, and runs n on the host when that declines.
bool may_be_window_call(const Node& n);

/// The call run by the reference kernels on host memory: `a` and `b` are the op's operands in
/// the order WindowKind lists them (b null for one-operand ops), `out` its result. The
/// emulator's window(); it rebuilds the node from the call, so it also checks that the call
/// says everything the node did.
void run_window_on_host(const WindowCall& c, const float* a, const float* b, float* out);

} // namespace sj::cuda
