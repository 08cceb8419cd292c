// Window nodes as cuDNN calls (Note [Window ops on cuDNN]), and those calls run on the host by
// the reference kernels for the emulator.
#include "WindowCall.h"

#include "../../ops/ChannelBlocking.h"
#include "../reference/Reference.h"

#include <symjax/Error.h>

#include <climits>
#include <cstring>
#include <sstream>

namespace sj::cuda {

// Note [Window ops on cuDNN]
// The reference kernels (src/backend/reference/ConvKernels.cpp) define the window ops; a node
// goes to cuDNN only where cuDNN's legacy API computes exactly that:
//  - f32 only, plain NCHW / NCDHW packed tensors (the cuda target blocks no channels; a blocked
//    node is declined anyway). cuDNN's f32 convolutions may use TF32 tensor cores, which keep
//    10 bits of mantissa: the device sets CUDNN_FMA_MATH so that they do not (cuBLAS's f32
//    GEMMs do not either).
//  - 2 or 3 spatial dims, as cuDNN's Nd descriptors take; a 1-d op becomes a 2-d one whose first
//    spatial dim is 1 (pad 0, stride 1, dilation 1, window 1), which computes the same thing.
//  - symmetric padding: cuDNN has one pad per dim. An asymmetric one ("same" padding with an
//    even filter) is declined and runs on the host.
//  - the reference's output size is floor((in + 2 pad - (k - 1) dilation - 1) / stride) + 1,
//    cuDNN's too; the mapping checks the given shapes against it. A backward op's result may be
//    larger than the forward's geometry needs (result_spatial, stride > 1): cuDNN takes the
//    dx / dw descriptor as given and writes zeros where no window reads, as the reference does.
//  - groups: cudnnSetConvolutionGroupCount, the filter [O, C / groups, k...] as the reference's.
//  - max pooling propagates NaN (CUDNN_PROPAGATE_NAN, the reference takes the first NaN) and
//    never selects padding. Its backward needs the forward's result, which the op does not
//    take (x, dy): the device computes it into a scratch buffer first. Where a window holds the
//    maximum twice the reference sends the gradient to the first; cuDNN's choice among ties is
//    not documented (max pooling after a relu has windows of zeros): an untested assumption
//    until this runs on a GPU.
//  - average pooling: CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING divides by the window size,
//    _EXCLUDE_PADDING by the input elements in the window, as count_include_pad says.
//  - every dim, pad and product of dims fits an int (cuDNN's descriptors are int); an empty
//    tensor is declined (cuDNN rejects 0 dims; the reference returns zeros or nothing).

namespace {

std::string join(const std::vector<int64_t>& v) {
    std::ostringstream os;
    os << '[';
    for (size_t i = 0; i < v.size(); ++i)
        os << (i ? "," : "") << v[i];
    os << ']';
    return os.str();
}

const char* kind_name(WindowKind k) {
    switch (k) {
    case WindowKind::Conv:
        return "conv";
    case WindowKind::ConvBackwardData:
        return "conv_backward_data";
    case WindowKind::ConvBackwardFilter:
        return "conv_backward_filter";
    case WindowKind::Pool:
        return "pool";
    case WindowKind::MaxPoolBackward:
        return "max_pool_backward";
    case WindowKind::AvgPoolBackward:
        return "avg_pool_backward";
    }
    return "?";
}

std::optional<WindowKind> kind_of(Op op) {
    switch (op) {
    case Op::Conv:
        return WindowKind::Conv;
    case Op::ConvBackwardData:
        return WindowKind::ConvBackwardData;
    case Op::ConvBackwardFilter:
        return WindowKind::ConvBackwardFilter;
    case Op::Pool:
        return WindowKind::Pool;
    case Op::MaxPoolBackward:
        return WindowKind::MaxPoolBackward;
    case Op::AvgPoolBackward:
        return WindowKind::AvgPoolBackward;
    case Op::BlockChannels:
    case Op::UnblockChannels: // layout reorders: the cuda target makes none
#define SJ_CASES_OUTSIDE_Window
#include "ops/OpCasesOutside.inc" // Note [Family switches]
        return std::nullopt;
    }
    return std::nullopt;
}

bool is_conv(WindowKind k) {
    return k == WindowKind::Conv || k == WindowKind::ConvBackwardData ||
           k == WindowKind::ConvBackwardFilter;
}

/// A reason to decline, collected for the caller.
struct Decline {
    std::string* why;
    std::nullopt_t operator()(const std::string& reason) const {
        if (why)
            *why = reason;
        return std::nullopt;
    }
};

/// The attrs' facts that do not depend on shapes: nullptr when acceptable, else the reason.
const char* static_reason(const Node& n, size_t spatial) {
    if (n.dtype() != DType::F32)
        return "not f32";
    if (detail::blocked_mask(n) != 0)
        return "a channel-blocked layout";
    if (spatial < 1 || spatial > 3)
        return "not 1, 2 or 3 spatial dims";
    auto fits = [](const std::vector<int64_t>& v, size_t n_, int64_t lo) {
        if (v.size() != n_)
            return false;
        for (int64_t e : v)
            if (e < lo || e > INT_MAX)
                return false;
        return true;
    };
    if (n.is(Op::Conv) || n.is(Op::ConvBackwardData) || n.is(Op::ConvBackwardFilter)) {
        const auto& a = n.attr<ConvAttrs>();
        if (!fits(a.strides, spatial, 1) || !fits(a.dilation, spatial, 1) ||
            !fits(a.pad_lo, spatial, 0) || !fits(a.pad_hi, spatial, 0) ||
            (a.groups < 1 && a.group_in < 1) || a.groups > INT_MAX)
            return "attributes out of cuDNN's range";
        if (a.pad_lo != a.pad_hi)
            return "asymmetric padding";
        return nullptr;
    }
    const auto& a = n.attr<PoolAttrs>();
    if (!fits(a.window, spatial, 1) || !fits(a.strides, spatial, 1) ||
        !fits(a.pad_lo, spatial, 0) || !fits(a.pad_hi, spatial, 0))
        return "attributes out of cuDNN's range";
    if (a.pad_lo != a.pad_hi)
        return "asymmetric padding";
    for (size_t d = 0; d < spatial; ++d)
        if (a.pad_lo[d] >= a.window[d])
            return "padding as wide as the window";
    return nullptr;
}

/// The rank n's forward input has (every operand and the result of a window op share it).
size_t spatial_of(const Node& n) {
    return n.rank() >= 2 ? size_t(n.rank() - 2) : 0;
}

bool fits_int(const Shape& s) {
    int64_t total = 1;
    for (int64_t d : s) {
        if (d <= 0 || d > INT_MAX)
            return false;
        total *= d;
        if (total > INT_MAX)
            return false;
    }
    return true;
}

/// Inserts a spatial dim of 1 (or `v` for per-dim attrs) in front of the spatial dims.
void lift_shape(Shape& s) {
    if (!s.empty())
        s.insert(s.begin() + 2, 1);
}
void lift(std::vector<int64_t>& v, int64_t value) {
    if (!v.empty())
        v.insert(v.begin(), value);
}

int64_t out_dim(int64_t in, int64_t k, int64_t pad, int64_t stride, int64_t dilation) {
    const int64_t span = in + 2 * pad - (k - 1) * dilation - 1;
    return span < 0 ? 0 : span / stride + 1;
}

} // namespace

std::string WindowCall::key() const {
    return str(); // (every field is in the description)
}

std::string WindowCall::str() const {
    std::ostringstream os;
    os << kind_name(kind) << " x " << join(x);
    if (is_conv(kind))
        os << " w " << join(w);
    os << " y " << join(y) << " pad " << join(pad) << " stride " << join(stride);
    if (is_conv(kind))
        os << " dilation " << join(dilation) << " groups " << groups;
    else
        os << " window " << join(window) << (pool == PoolKind::Max ? " max" : " avg")
           << (count_include_pad ? " include_pad" : " exclude_pad");
    return os.str();
}

bool may_be_window_call(const Node& n) {
    return kind_of(n.op()) && static_reason(n, spatial_of(n)) == nullptr;
}

std::optional<WindowCall> window_call_for(const Node& n, const std::vector<TensorType>& in,
                                          const TensorType& out, std::string* why) {
    const Decline no{why};
    const std::optional<WindowKind> kind = kind_of(n.op());
    if (!kind)
        return no("not a window op");
    const size_t spatial = out.shape.size() >= 2 ? out.shape.size() - 2 : 0;
    if (const char* r = static_reason(n, spatial))
        return no(r);
    const size_t operands =
        *kind == WindowKind::Pool || *kind == WindowKind::AvgPoolBackward ? 1 : 2;
    if (in.size() < operands)
        return no("missing operands");
    for (size_t i = 0; i < operands; ++i)
        if (in[i].dtype != DType::F32 || in[i].shape.size() != spatial + 2)
            return no("an operand that is not f32 of the result's rank");
    if (out.dtype != DType::F32)
        return no("not f32");

    WindowCall c;
    c.kind = *kind;
    switch (*kind) {
    case WindowKind::Conv:
        c.x = in[0].shape, c.w = in[1].shape, c.y = out.shape;
        break;
    case WindowKind::ConvBackwardData:
        c.y = in[0].shape, c.w = in[1].shape, c.x = out.shape;
        break;
    case WindowKind::ConvBackwardFilter:
        c.x = in[0].shape, c.y = in[1].shape, c.w = out.shape;
        break;
    case WindowKind::Pool:
        c.x = in[0].shape, c.y = out.shape;
        break;
    case WindowKind::MaxPoolBackward:
        c.x = in[0].shape, c.y = in[1].shape;
        break;
    case WindowKind::AvgPoolBackward:
        c.y = in[0].shape, c.x = out.shape;
        break;
    }
    if (*kind == WindowKind::MaxPoolBackward && out.shape != c.x)
        return no("a result that is not the input's shape");
    for (const Shape* s : {&c.x, &c.w, &c.y})
        if (!s->empty() && !fits_int(*s))
            return no("an empty tensor or a size over INT_MAX");
    if (c.x[0] != c.y[0])
        return no("batch sizes differ");

    if (is_conv(*kind)) {
        const auto& a = n.attr<ConvAttrs>();
        // (groups that follow the channels: fixed by the bound input, Note [Groups that follow
        // the batch] in src/ops/Conv.cpp)
        c.pad = a.pad_lo, c.stride = a.strides, c.dilation = a.dilation,
        c.groups = conv_groups(a, c.x[1]);
        if (c.groups < 1 || c.x[1] % c.groups || c.w[0] % c.groups || c.x[1] != c.w[1] * c.groups ||
            c.y[1] != c.w[0])
            return no("channels that do not match the filter and groups");
        for (size_t d = 0; d < spatial; ++d)
            if (c.y[d + 2] != out_dim(c.x[d + 2], c.w[d + 2], c.pad[d], c.stride[d], c.dilation[d]))
                return no("an output size that is not the convolution's");
    } else {
        const auto& a = n.attr<PoolAttrs>();
        c.pad = a.pad_lo, c.stride = a.strides, c.window = a.window, c.pool = a.kind;
        c.dilation.assign(spatial, 1);
        c.count_include_pad = a.count_include_pad;
        if ((*kind == WindowKind::MaxPoolBackward && a.kind != PoolKind::Max) ||
            (*kind == WindowKind::AvgPoolBackward && a.kind != PoolKind::Avg))
            return no("a pooling kind that is not the op's");
        if (c.x[1] != c.y[1])
            return no("channels differ");
        for (size_t d = 0; d < spatial; ++d)
            if (c.y[d + 2] != out_dim(c.x[d + 2], c.window[d], c.pad[d], c.stride[d], 1))
                return no("an output size that is not the pooling's");
    }
    if (spatial == 1) { // Note [Window ops on cuDNN]: 1-d as 2-d
        lift_shape(c.x), lift_shape(c.w), lift_shape(c.y);
        lift(c.pad, 0), lift(c.stride, 1), lift(c.dilation, 1), lift(c.window, 1);
    }
    return c;
}

void run_window_on_host(const WindowCall& c, const float* a, const float* b, float* out) {
    const Shape sp_x(c.x.begin() + 2, c.x.end());
    auto leaf = [](const Shape& s) {
        return Node::make(Op::Placeholder, PlaceholderAttrs{0, DType::F32, s}, {});
    };
    auto array = [](const Shape& s, const float* p) {
        Array r(DType::F32, s);
        std::memcpy(r.raw(), p, size_t(numel(s)) * sizeof(float));
        return r;
    };
    ConvAttrs ca{c.stride, c.pad, c.pad, c.dilation, c.groups, {}};
    PoolAttrs pa{c.pool, c.window, c.stride, c.pad, c.pad, c.count_include_pad, {}};
    NodePtr n;
    std::vector<Array> ins;
    Shape result;
    switch (c.kind) {
    case WindowKind::Conv:
        n = Node::make(Op::Conv, ca, {leaf(c.x), leaf(c.w)});
        ins = {array(c.x, a), array(c.w, b)};
        result = c.y;
        break;
    case WindowKind::ConvBackwardData:
        ca.result_spatial = sp_x;
        n = Node::make(Op::ConvBackwardData, ca, {leaf(c.y), leaf(c.w)});
        ins = {array(c.y, a), array(c.w, b)};
        result = c.x;
        break;
    case WindowKind::ConvBackwardFilter:
        ca.result_spatial = Shape(c.w.begin() + 2, c.w.end());
        n = Node::make(Op::ConvBackwardFilter, ca, {leaf(c.x), leaf(c.y)});
        ins = {array(c.x, a), array(c.y, b)};
        result = c.w;
        break;
    case WindowKind::Pool:
        n = Node::make(Op::Pool, pa, {leaf(c.x)});
        ins = {array(c.x, a)};
        result = c.y;
        break;
    case WindowKind::MaxPoolBackward:
        n = Node::make(Op::MaxPoolBackward, pa, {leaf(c.x), leaf(c.y)});
        ins = {array(c.x, a), array(c.y, b)};
        result = c.x;
        break;
    case WindowKind::AvgPoolBackward:
        pa.result_spatial = sp_x;
        n = Node::make(Op::AvgPoolBackward, pa, {leaf(c.y)});
        ins = {array(c.y, a)};
        result = c.x;
        break;
    }
    const TensorType t{DType::F32, result};
    SJ_ASSERT(n->type().shape == result)
        << "cuda window call " << c.str() << ": the rebuilt node's type is " << type_str(n->type());
    const Array r = ref::kernel_for(n->op())(ref::KernelCtx{*n, ins, t, 0});
    std::memcpy(out, r.raw(), size_t(numel(result)) * sizeof(float));
}

} // namespace sj::cuda
