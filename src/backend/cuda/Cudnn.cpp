// cuDNN opened with dlopen, and window calls (WindowCall.h) run through its legacy API.
#include "Cudnn.h"

#include "Driver.h"

#include <symjax/Error.h>

#include <dlfcn.h>

#include <memory>
#include <mutex>
#include <type_traits>
#include <vector>

namespace sj::cuda {

// Note [cuDNN calls]
// cuDNN is opened like the driver and cuBLAS (Note [Loading the driver] in Driver.cpp):
// libcudnn.so.9 only, at the first window call on a GPU, so the plugin loads without it and a
// machine without cuDNN fails only when a convolution reaches a GPU. cuDNN 9's libcudnn.so.9 is
// a shim that opens its sub-libraries (ops, cnn, engines) from its own directory; cudnn.h gives
// only types here. We use the legacy descriptor API (deprecated in cuDNN 9 but complete for
// these ops) rather than the graph API: one call per op, no plan building.
//  - Algorithms: the first time a call's key (WindowCall::key(): op, shapes, geometry) is seen,
//    cudnnGetConvolution*Algorithm_v7 ranks the algorithms by cuDNN's heuristics without
//    running anything; we take the best that succeeds, does not use tensor cores (TF32 would
//    cost f32 its precision; the descriptor says CUDNN_FMA_MATH), is deterministic (the backward
//    ops' atomics-based algorithms are not) and needs at most kMaxWorkspace bytes, relaxing the
//    last two if none is; and ask cudnnGetConvolution*WorkspaceSize for its workspace. Both are
//    cached per key for the session (the device's life). cudnnFind* would time each algorithm
//    on the device; not done: it runs every candidate once per new shape.
//  - Workspaces and max pooling's scratch come from the device's caching allocator and go back
//    to it after the call is queued: the next user of the block is queued after it on the same
//    stream (Note [One stream] in CudaDevice.cpp).
//  - None of this has run on a GPU (docs/gpu.md): only the mapping (WindowCall.cpp) and the
//    emulator's path are tested.

namespace {

constexpr size_t kMaxWorkspace = size_t(1) << 30;

std::unique_ptr<Cudnn> open_cudnn() {
    const char* lib = "libcudnn.so.9";
    void* h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
    SJ_CHECK(h != nullptr, Error)
        << "backend \"cuda\": cannot open cuDNN, which runs its convolutions and pooling (dlopen "
        << lib << ": " << dl_error() << ")";
    auto d = std::make_unique<Cudnn>();
#define SJ_RESOLVE(field, symbol) dl_resolve(h, lib, #symbol, d->field)
    SJ_RESOLVE(get_version, cudnnGetVersion);
    SJ_RESOLVE(get_error_string, cudnnGetErrorString);
    SJ_RESOLVE(create, cudnnCreate);
    SJ_RESOLVE(destroy, cudnnDestroy);
    SJ_RESOLVE(set_stream, cudnnSetStream);
    SJ_RESOLVE(create_tensor, cudnnCreateTensorDescriptor);
    SJ_RESOLVE(set_tensor_nd, cudnnSetTensorNdDescriptor);
    SJ_RESOLVE(destroy_tensor, cudnnDestroyTensorDescriptor);
    SJ_RESOLVE(create_filter, cudnnCreateFilterDescriptor);
    SJ_RESOLVE(set_filter_nd, cudnnSetFilterNdDescriptor);
    SJ_RESOLVE(destroy_filter, cudnnDestroyFilterDescriptor);
    SJ_RESOLVE(create_conv, cudnnCreateConvolutionDescriptor);
    SJ_RESOLVE(set_conv_nd, cudnnSetConvolutionNdDescriptor);
    SJ_RESOLVE(set_conv_group_count, cudnnSetConvolutionGroupCount);
    SJ_RESOLVE(set_conv_math_type, cudnnSetConvolutionMathType);
    SJ_RESOLVE(destroy_conv, cudnnDestroyConvolutionDescriptor);
    SJ_RESOLVE(create_pool, cudnnCreatePoolingDescriptor);
    SJ_RESOLVE(set_pool_nd, cudnnSetPoolingNdDescriptor);
    SJ_RESOLVE(destroy_pool, cudnnDestroyPoolingDescriptor);
    SJ_RESOLVE(get_fwd_algorithm, cudnnGetConvolutionForwardAlgorithm_v7);
    SJ_RESOLVE(get_bwd_data_algorithm, cudnnGetConvolutionBackwardDataAlgorithm_v7);
    SJ_RESOLVE(get_bwd_filter_algorithm, cudnnGetConvolutionBackwardFilterAlgorithm_v7);
    SJ_RESOLVE(fwd_workspace, cudnnGetConvolutionForwardWorkspaceSize);
    SJ_RESOLVE(bwd_data_workspace, cudnnGetConvolutionBackwardDataWorkspaceSize);
    SJ_RESOLVE(bwd_filter_workspace, cudnnGetConvolutionBackwardFilterWorkspaceSize);
    SJ_RESOLVE(conv_forward, cudnnConvolutionForward);
    SJ_RESOLVE(conv_backward_data, cudnnConvolutionBackwardData);
    SJ_RESOLVE(conv_backward_filter, cudnnConvolutionBackwardFilter);
    SJ_RESOLVE(pool_forward, cudnnPoolingForward);
    SJ_RESOLVE(pool_backward, cudnnPoolingBackward);
#undef SJ_RESOLVE
    return d;
}

/// A cuDNN descriptor, destroyed with the scope (a failing destroy is ignored: nothing to do).
template <class T, auto Destroy> struct Desc { // Destroy: a Cudnn member, cudnnDestroy*
    explicit Desc(const Cudnn& l) : lib(l) {}
    ~Desc() {
        if (d)
            (lib.*Destroy)(d);
    }
    Desc(const Desc&) = delete;
    Desc& operator=(const Desc&) = delete;
    const Cudnn& lib;
    T d = nullptr;
};

std::vector<int> ints(const std::vector<int64_t>& v) {
    return std::vector<int>(v.begin(), v.end()); // (window_call_for checked they fit)
}

/// A packed row-major f32 tensor descriptor of shape s.
cudnnTensorDescriptor_t make_tensor(const Cudnn& l, cudnnTensorDescriptor_t& d, const Shape& s) {
    l.check(l.create_tensor(&d), "cudnnCreateTensorDescriptor");
    std::vector<int> dims = ints(s), strides(s.size(), 1);
    for (size_t i = s.size() - 1; i-- > 0;)
        strides[i] = strides[i + 1] * dims[i + 1];
    l.check(l.set_tensor_nd(d, CUDNN_DATA_FLOAT, int(dims.size()), dims.data(), strides.data()),
            "cudnnSetTensorNdDescriptor");
    return d;
}

/// The best algorithm of `perf` (cuDNN's ranking) by Note [cuDNN calls]; -1 when none succeeds.
template <class Perf> int pick(const Perf* perf, int n) {
    auto usable = [](const Perf& p) {
        return p.status == CUDNN_STATUS_SUCCESS && p.mathType != CUDNN_TENSOR_OP_MATH &&
               p.mathType != CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION;
    };
    for (int i = 0; i < n; ++i)
        if (usable(perf[i]) && perf[i].determinism == CUDNN_DETERMINISTIC &&
            perf[i].memory <= kMaxWorkspace)
            return int(perf[i].algo);
    for (int i = 0; i < n; ++i)
        if (usable(perf[i]))
            return int(perf[i].algo);
    return -1;
}

/// Device memory for one call, back to the allocator at the end of the scope.
struct Scratch {
    const CudnnSession::Free& free;
    DevicePtr p = 0;
    ~Scratch() {
        if (p) {
            try {
                free(p);
            } catch (const Error&) { // (an allocator bookkeeping bug; never from a destructor)
            }
        }
    }
};

} // namespace

void Cudnn::fail(cudnnStatus_t s, const char* call) const {
    const char* text = get_error_string ? get_error_string(s) : nullptr;
    SJ_THROW(Error) << "backend \"cuda\": " << call
                    << " failed: " << (text ? text : "cudnnStatus_t") << " (code " << int(s) << ")";
}

const Cudnn& cudnn() {
    return open_once<Cudnn>(open_cudnn);
}

CudnnSession::~CudnnSession() {
    if (handle_)
        cudnn().destroy(handle_);
}

void CudnnSession::run(const WindowCall& c, DevicePtr a, DevicePtr b, DevicePtr out) {
    const Cudnn& l = cudnn();
    if (!handle_) {
        cudnnHandle_t h = nullptr;
        l.check(l.create(&h), "cudnnCreate");
        // (cudaStream_t and CUstream are the same type: the runtime's streams are the driver's)
        const cudnnStatus_t s = l.set_stream(h, reinterpret_cast<cudaStream_t>(stream_));
        if (s != CUDNN_STATUS_SUCCESS) {
            l.destroy(h);
            l.fail(s, "cudnnSetStream");
        }
        handle_ = h;
    }
    switch (c.kind) {
    case WindowKind::Conv:
    case WindowKind::ConvBackwardData:
    case WindowKind::ConvBackwardFilter:
        conv(c, a, b, out);
        return;
    case WindowKind::Pool:
    case WindowKind::MaxPoolBackward:
    case WindowKind::AvgPoolBackward:
        pool(c, a, b, out);
        return;
    }
}

void CudnnSession::conv(const WindowCall& c, DevicePtr a, DevicePtr b, DevicePtr out) {
    const Cudnn& l = cudnn();
    Desc<cudnnTensorDescriptor_t, &Cudnn::destroy_tensor> x(l), y(l);
    Desc<cudnnFilterDescriptor_t, &Cudnn::destroy_filter> w(l);
    Desc<cudnnConvolutionDescriptor_t, &Cudnn::destroy_conv> cd(l);
    make_tensor(l, x.d, c.x);
    make_tensor(l, y.d, c.y);
    l.check(l.create_filter(&w.d), "cudnnCreateFilterDescriptor");
    const std::vector<int> wd = ints(c.w);
    l.check(l.set_filter_nd(w.d, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, int(wd.size()), wd.data()),
            "cudnnSetFilterNdDescriptor");
    l.check(l.create_conv(&cd.d), "cudnnCreateConvolutionDescriptor");
    const std::vector<int> pad = ints(c.pad), stride = ints(c.stride), dil = ints(c.dilation);
    // cross-correlation: the reference does not flip the filter
    l.check(l.set_conv_nd(cd.d, int(pad.size()), pad.data(), stride.data(), dil.data(),
                          CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
            "cudnnSetConvolutionNdDescriptor");
    l.check(l.set_conv_group_count(cd.d, int(c.groups)), "cudnnSetConvolutionGroupCount");
    l.check(l.set_conv_math_type(cd.d, CUDNN_FMA_MATH), "cudnnSetConvolutionMathType");

    auto it = algorithms_.find(c.key());
    if (it == algorithms_.end()) {
        Algorithm alg;
        int n = 0, chosen = -1;
        switch (c.kind) {
        case WindowKind::Conv: {
            cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
            l.check(l.get_fwd_algorithm(handle_, x.d, w.d, cd.d, y.d,
                                        CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &n, perf),
                    "cudnnGetConvolutionForwardAlgorithm_v7");
            chosen = pick(perf, n);
            if (chosen >= 0)
                l.check(l.fwd_workspace(handle_, x.d, w.d, cd.d, y.d,
                                        cudnnConvolutionFwdAlgo_t(chosen), &alg.workspace),
                        "cudnnGetConvolutionForwardWorkspaceSize");
            break;
        }
        case WindowKind::ConvBackwardData: {
            cudnnConvolutionBwdDataAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT];
            l.check(l.get_bwd_data_algorithm(handle_, w.d, y.d, cd.d, x.d,
                                             CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT, &n, perf),
                    "cudnnGetConvolutionBackwardDataAlgorithm_v7");
            chosen = pick(perf, n);
            if (chosen >= 0)
                l.check(l.bwd_data_workspace(handle_, w.d, y.d, cd.d, x.d,
                                             cudnnConvolutionBwdDataAlgo_t(chosen), &alg.workspace),
                        "cudnnGetConvolutionBackwardDataWorkspaceSize");
            break;
        }
        case WindowKind::ConvBackwardFilter: {
            cudnnConvolutionBwdFilterAlgoPerf_t perf[CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT];
            l.check(l.get_bwd_filter_algorithm(handle_, x.d, y.d, cd.d, w.d,
                                               CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT, &n, perf),
                    "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
            chosen = pick(perf, n);
            if (chosen >= 0)
                l.check(l.bwd_filter_workspace(handle_, x.d, y.d, cd.d, w.d,
                                               cudnnConvolutionBwdFilterAlgo_t(chosen),
                                               &alg.workspace),
                        "cudnnGetConvolutionBackwardFilterWorkspaceSize");
            break;
        }
        case WindowKind::Pool:
        case WindowKind::MaxPoolBackward:
        case WindowKind::AvgPoolBackward:
            SJ_THROW(InternalError) << "cudnn conv: " << c.str() << " is a pooling call";
        }
        SJ_CHECK(chosen >= 0, Error)
            << "backend \"cuda\": cuDNN has no algorithm without tensor cores for " << c.str()
            << " (" << n << " candidates)";
        alg.algo = chosen;
        it = algorithms_.emplace(c.key(), alg).first;
    }
    const Algorithm alg = it->second;
    Scratch ws{free_};
    if (alg.workspace)
        ws.p = alloc_(alg.workspace);
    void* wsp = reinterpret_cast<void*>(ws.p);
    const float one = 1, zero = 0;
    auto ptr = [](DevicePtr p) { return reinterpret_cast<void*>(p); };
    switch (c.kind) {
    case WindowKind::Conv: // (x, w) -> y
        l.check(l.conv_forward(handle_, &one, x.d, ptr(a), w.d, ptr(b), cd.d,
                               cudnnConvolutionFwdAlgo_t(alg.algo), wsp, alg.workspace, &zero, y.d,
                               ptr(out)),
                "cudnnConvolutionForward");
        return;
    case WindowKind::ConvBackwardData: // (dy, w) -> dx
        l.check(l.conv_backward_data(handle_, &one, w.d, ptr(b), y.d, ptr(a), cd.d,
                                     cudnnConvolutionBwdDataAlgo_t(alg.algo), wsp, alg.workspace,
                                     &zero, x.d, ptr(out)),
                "cudnnConvolutionBackwardData");
        return;
    case WindowKind::ConvBackwardFilter: // (x, dy) -> dw
        l.check(l.conv_backward_filter(handle_, &one, x.d, ptr(a), y.d, ptr(b), cd.d,
                                       cudnnConvolutionBwdFilterAlgo_t(alg.algo), wsp,
                                       alg.workspace, &zero, w.d, ptr(out)),
                "cudnnConvolutionBackwardFilter");
        return;
    case WindowKind::Pool:
    case WindowKind::MaxPoolBackward:
    case WindowKind::AvgPoolBackward:
        break;
    }
}

void CudnnSession::pool(const WindowCall& c, DevicePtr a, DevicePtr b, DevicePtr out) {
    const Cudnn& l = cudnn();
    Desc<cudnnTensorDescriptor_t, &Cudnn::destroy_tensor> x(l), y(l);
    Desc<cudnnPoolingDescriptor_t, &Cudnn::destroy_pool> pd(l);
    make_tensor(l, x.d, c.x);
    make_tensor(l, y.d, c.y);
    l.check(l.create_pool(&pd.d), "cudnnCreatePoolingDescriptor");
    const cudnnPoolingMode_t mode = c.pool == PoolKind::Max ? CUDNN_POOLING_MAX
                                    : c.count_include_pad
                                        ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                        : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
    const std::vector<int> win = ints(c.window), pad = ints(c.pad), stride = ints(c.stride);
    l.check(l.set_pool_nd(pd.d, mode, CUDNN_PROPAGATE_NAN, int(win.size()), win.data(), pad.data(),
                          stride.data()),
            "cudnnSetPoolingNdDescriptor");
    const float one = 1, zero = 0;
    auto ptr = [](DevicePtr p) { return reinterpret_cast<void*>(p); };
    switch (c.kind) {
    case WindowKind::Pool: // (x) -> y
        l.check(l.pool_forward(handle_, pd.d, &one, x.d, ptr(a), &zero, y.d, ptr(out)),
                "cudnnPoolingForward");
        return;
    case WindowKind::MaxPoolBackward: { // (x, dy) -> dx; cuDNN also reads the forward's y
        Scratch fwd{free_};
        fwd.p = alloc_(size_t(numel(c.y)) * sizeof(float));
        l.check(l.pool_forward(handle_, pd.d, &one, x.d, ptr(a), &zero, y.d, ptr(fwd.p)),
                "cudnnPoolingForward");
        l.check(l.pool_backward(handle_, pd.d, &one, y.d, ptr(fwd.p), y.d, ptr(b), x.d, ptr(a),
                                &zero, x.d, ptr(out)),
                "cudnnPoolingBackward");
        return;
    }
    case WindowKind::AvgPoolBackward: // (dy) -> dx; averaging reads neither x nor y: any
                                      // addresses of their sizes do
        l.check(l.pool_backward(handle_, pd.d, &one, y.d, ptr(a), y.d, ptr(a), x.d, ptr(out), &zero,
                                x.d, ptr(out)),
                "cudnnPoolingBackward");
        return;
    case WindowKind::Conv:
    case WindowKind::ConvBackwardData:
    case WindowKind::ConvBackwardFilter:
        break;
    }
    SJ_THROW(InternalError) << "cudnn pool: " << c.str() << " is a convolution";
}

} // namespace sj::cuda
