// What the cuda runner needs from a device: memory, copies, kernels, GEMMs and window calls. A
// GPU through the CUDA driver API, cuBLAS and cuDNN (CudaDevice.cpp, all loaded with dlopen), or
// the host emulator (Emulator.cpp), which runs the same kernels' LLVM IR on the cpu with the same
// thread map, and each window call's reference kernel, so that the runner and the kernels are
// tested on machines without a GPU (Note [The emulator]).
#pragma once

#include "GpuKernel.h"
#include "WindowCall.h"

#include <symjax/DType.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

namespace sj::cuda {

/// An address in device memory (a host address in the emulator); 0 is null.
using DevicePtr = uint64_t;

struct DeviceInfo {
    std::string name; // "NVIDIA H200", "emulator"
    int sm = 0;       // compute capability * 10 (90 for sm_90); 0 for the emulator
    DeviceLimits limits;
    int64_t memory = 0; // bytes of device memory
};

/// A kernel loaded on a device.
class DeviceKernel {
public:
    virtual ~DeviceKernel() = default;
};

/// C[i] = alpha * op(A[i]) op(B[i]) + beta * C[i] for i < batch, column-major as in BLAS, f32 or
/// f64 (`dtype`).
struct GemmArgs {
    DType dtype = DType::F32;
    bool trans_a = false, trans_b = false;
    int64_t m = 0, n = 0, k = 0, batch = 1;
    DevicePtr a = 0, b = 0, c = 0;
    int64_t lda = 0, ldb = 0, ldc = 0;
    int64_t stride_a = 0, stride_b = 0, stride_c = 0; // elements between batch entries
    double alpha = 1, beta = 0;
};

class Device {
public:
    virtual ~Device() = default;
    virtual const DeviceInfo& info() const = 0;
    /// Device memory of `bytes` bytes; throws sj::Error naming the size and the device's free
    /// memory when it cannot.
    virtual DevicePtr alloc(size_t bytes) = 0;
    virtual void free(DevicePtr p) = 0;
    /// Host to device, ordered on the device's stream (the host buffer must live until the next
    /// synchronize()).
    virtual void upload(DevicePtr dst, const void* src, size_t bytes) = 0;
    /// Device to host; returns when the bytes are in `dst` (after everything queued before).
    virtual void download(void* dst, DevicePtr src, size_t bytes) = 0;
    /// Device to device, ordered on the stream.
    virtual void copy(DevicePtr dst, DevicePtr src, size_t bytes) = 0;
    /// Waits for everything queued; throws sj::Error with the device's message if it failed.
    virtual void synchronize() = 0;
    /// The kernel compiled for this device (PTX for a GPU, host code for the emulator).
    virtual std::shared_ptr<DeviceKernel> load(const GpuKernel& k) = 0;
    /// Launches `k` on `grid` blocks of `block` threads with its two arguments: the device
    /// addresses of its buffer table (operand addresses, loads then outputs) and of its params
    /// (KernelSpec's int64 params).
    virtual void launch(const DeviceKernel& k, int64_t grid, int block, DevicePtr bufs,
                        DevicePtr params) = 0;
    virtual void gemm(const GemmArgs& g) = 0;
    /// A convolution or pooling call (cuDNN on a GPU, Cudnn.cpp): `a` and `b` are its operands
    /// in the order WindowKind lists them (b is 0 for one-operand ops), `out` its result, all
    /// f32 and packed. Ordered on the stream like a kernel.
    virtual void window(const WindowCall& c, DevicePtr a, DevicePtr b, DevicePtr out) = 0;
};

/// The host emulator (Emulator.cpp), with small launch limits, or with an H200's.
std::shared_ptr<Device> make_emulator();
std::shared_ptr<Device> make_emulator_h200();

/// The device the cuda backend runs on: $SJ_CUDA_DEVICE, a GPU's ordinal (default 0) or
/// "emulator". Throws sj::Error saying what is missing (no driver, no GPU, a bad ordinal).
std::shared_ptr<Device> open_device();

} // namespace sj::cuda
