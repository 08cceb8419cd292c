// cuDNN 9's legacy convolution and pooling API, opened with dlopen (Note [Loading the driver] in
// Driver.cpp), and one device's cuDNN session: its handle on the device's stream and the
// algorithms chosen per call (Note [cuDNN calls] in Cudnn.cpp).
#pragma once

#include "Device.h"
#include "WindowCall.h"

#include <cuda.h>
#include <cudnn.h>

#include <functional>
#include <map>
#include <string>

namespace sj::cuda {

/// cuDNN's entry points (libcudnn.so.9, which loads its sub-libraries itself). Each is the
/// function of the same name in cudnn.h.
struct Cudnn {
    decltype(&::cudnnGetVersion) get_version;
    decltype(&::cudnnGetErrorString) get_error_string;
    decltype(&::cudnnCreate) create;
    decltype(&::cudnnDestroy) destroy;
    decltype(&::cudnnSetStream) set_stream;
    decltype(&::cudnnCreateTensorDescriptor) create_tensor;
    decltype(&::cudnnSetTensorNdDescriptor) set_tensor_nd;
    decltype(&::cudnnDestroyTensorDescriptor) destroy_tensor;
    decltype(&::cudnnCreateFilterDescriptor) create_filter;
    decltype(&::cudnnSetFilterNdDescriptor) set_filter_nd;
    decltype(&::cudnnDestroyFilterDescriptor) destroy_filter;
    decltype(&::cudnnCreateConvolutionDescriptor) create_conv;
    decltype(&::cudnnSetConvolutionNdDescriptor) set_conv_nd;
    decltype(&::cudnnSetConvolutionGroupCount) set_conv_group_count;
    decltype(&::cudnnSetConvolutionMathType) set_conv_math_type;
    decltype(&::cudnnDestroyConvolutionDescriptor) destroy_conv;
    decltype(&::cudnnCreatePoolingDescriptor) create_pool;
    decltype(&::cudnnSetPoolingNdDescriptor) set_pool_nd;
    decltype(&::cudnnDestroyPoolingDescriptor) destroy_pool;
    decltype(&::cudnnGetConvolutionForwardAlgorithm_v7) get_fwd_algorithm;
    decltype(&::cudnnGetConvolutionBackwardDataAlgorithm_v7) get_bwd_data_algorithm;
    decltype(&::cudnnGetConvolutionBackwardFilterAlgorithm_v7) get_bwd_filter_algorithm;
    decltype(&::cudnnGetConvolutionForwardWorkspaceSize) fwd_workspace;
    decltype(&::cudnnGetConvolutionBackwardDataWorkspaceSize) bwd_data_workspace;
    decltype(&::cudnnGetConvolutionBackwardFilterWorkspaceSize) bwd_filter_workspace;
    decltype(&::cudnnConvolutionForward) conv_forward;
    decltype(&::cudnnConvolutionBackwardData) conv_backward_data;
    decltype(&::cudnnConvolutionBackwardFilter) conv_backward_filter;
    decltype(&::cudnnPoolingForward) pool_forward;
    decltype(&::cudnnPoolingBackward) pool_backward;

    /// Throws sj::Error naming the call and cudnnGetErrorString's text unless s is
    /// CUDNN_STATUS_SUCCESS.
    void check(cudnnStatus_t s, const char* call) const {
        if (s != CUDNN_STATUS_SUCCESS)
            fail(s, call);
    }
    [[noreturn]] void fail(cudnnStatus_t s, const char* call) const;
};

/// The process's cuDNN, opened on first use (the first window call on a GPU). Throws sj::Error
/// naming the file and dlerror's reason when it does not open, or the missing entry point.
const Cudnn& cudnn();

/// One device's cuDNN: a handle bound to the device's stream, made at the first call, and the
/// algorithm and workspace size chosen for each call's key. Not thread-safe: the device calls it
/// under its lock, with its context current.
class CudnnSession {
public:
    /// Device memory for workspaces and scratch (the device's caching allocator), and its free.
    using Alloc = std::function<DevicePtr(size_t)>;
    using Free = std::function<void(DevicePtr)>;
    CudnnSession(CUstream stream, Alloc alloc, Free free)
        : stream_(stream), alloc_(std::move(alloc)), free_(std::move(free)) {}
    ~CudnnSession();
    CudnnSession(const CudnnSession&) = delete;
    CudnnSession& operator=(const CudnnSession&) = delete;

    /// Queues call c on the stream: operands a and b (WindowKind's order), result out.
    void run(const WindowCall& c, DevicePtr a, DevicePtr b, DevicePtr out);

private:
    struct Algorithm {
        int algo = 0;         // a cudnnConvolution{Fwd,BwdData,BwdFilter}Algo_t
        size_t workspace = 0; // bytes
    };
    void conv(const WindowCall& c, DevicePtr a, DevicePtr b, DevicePtr out);
    void pool(const WindowCall& c, DevicePtr a, DevicePtr b, DevicePtr out);

    CUstream stream_;
    Alloc alloc_;
    Free free_;
    cudnnHandle_t handle_ = nullptr;
    std::map<std::string, Algorithm> algorithms_; // per WindowCall::key()
};

} // namespace sj::cuda
