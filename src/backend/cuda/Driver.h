// The CUDA driver API and cuBLAS, opened with dlopen (Note [Loading the driver] in Driver.cpp):
// the entry points the cuda device uses, and the checks that turn their status codes into
// sj::Error.
#pragma once

#include <cublas_v2.h>
#include <cuda.h>

#include <memory>
#include <mutex>
#include <string>

namespace sj::cuda {

/// The driver's entry points (libcuda.so.1). Each one is the function of the same name in cuda.h,
/// at the ABI version named in the comment (cuda.h maps the plain names onto those by macros).
struct Driver {
    decltype(&::cuInit) init;
    decltype(&::cuDeviceGetCount) device_get_count;
    decltype(&::cuDeviceGet) device_get;
    decltype(&::cuDeviceGetName) device_get_name;
    decltype(&::cuDeviceGetAttribute) device_get_attribute;
    decltype(&::cuDeviceTotalMem_v2) device_total_mem; // _v2
    decltype(&::cuDevicePrimaryCtxRetain) primary_ctx_retain;
    decltype(&::cuCtxSetCurrent) ctx_set_current;
    decltype(&::cuStreamCreate) stream_create;
    decltype(&::cuStreamSynchronize) stream_synchronize;
    decltype(&::cuMemAlloc_v2) mem_alloc;                // _v2
    decltype(&::cuMemFree_v2) mem_free;                  // _v2
    decltype(&::cuMemGetInfo_v2) mem_get_info;           // _v2
    decltype(&::cuMemcpyHtoDAsync_v2) memcpy_htod_async; // _v2
    decltype(&::cuMemcpyDtoHAsync_v2) memcpy_dtoh_async; // _v2
    decltype(&::cuMemcpyDtoDAsync_v2) memcpy_dtod_async; // _v2
    decltype(&::cuMemHostAlloc) mem_host_alloc;
    decltype(&::cuMemFreeHost) mem_free_host;
    decltype(&::cuModuleLoadDataEx) module_load_data_ex;
    decltype(&::cuModuleGetFunction) module_get_function;
    decltype(&::cuLaunchKernel) launch_kernel;
    decltype(&::cuGetErrorName) get_error_name;
    decltype(&::cuGetErrorString) get_error_string;

    /// "CUDA_ERROR_OUT_OF_MEMORY (out of memory)".
    std::string describe(CUresult r) const;
    /// Throws sj::Error naming the call, the error's name and its text unless r is CUDA_SUCCESS.
    void check(CUresult r, const char* call) const {
        if (r != CUDA_SUCCESS)
            fail(r, call);
    }
    [[noreturn]] void fail(CUresult r, const char* call) const;
};

/// The process's driver, opened and initialised (cuInit) on first use. Throws sj::Error saying
/// that there is no NVIDIA driver, and how to run on the emulator instead, when libcuda.so.1
/// cannot be opened; or naming the missing entry point, or cuInit's error.
const Driver& driver();

/// cuBLAS's entry points (libcublas.so.13, else .12).
struct Cublas {
    decltype(&::cublasCreate_v2) create;
    decltype(&::cublasDestroy_v2) destroy;
    decltype(&::cublasSetStream_v2) set_stream;
    decltype(&::cublasSgemmStridedBatched) sgemm_strided_batched;
    decltype(&::cublasDgemmStridedBatched) dgemm_strided_batched;
    decltype(&::cublasGetStatusName) get_status_name; // may be null (older cuBLAS)

    /// Throws sj::Error naming the call and the status unless s is CUBLAS_STATUS_SUCCESS.
    void check(cublasStatus_t s, const char* call) const {
        if (s != CUBLAS_STATUS_SUCCESS)
            fail(s, call);
    }
    [[noreturn]] void fail(cublasStatus_t s, const char* call) const;
};

/// The process's cuBLAS, opened on first use (the first GEMM). Throws sj::Error naming the files
/// tried when none opens.
const Cublas& cublas();

// ---- what every library the plugin opens with dlopen shares (Note [Loading the driver]) -----
/// dlerror()'s text ("unknown error" when it has none).
std::string dl_error();
/// dlsym(h, name) as a function pointer of type F; throws sj::Error naming `lib` and `name` when
/// the library has no such entry point.
void* dl_symbol(void* h, const char* lib, const char* name);
template <class F> void dl_resolve(void* h, const char* lib, const char* name, F& out) {
    out = reinterpret_cast<F>(dl_symbol(h, lib, name));
}
/// A process-wide library handle opened on first success by `open`; a failure is thrown to each
/// caller and tried again by the next one (the user may install the library, or fix
/// LD_LIBRARY_PATH, and retry). Never destroyed before exit.
template <class T> const T& open_once(std::unique_ptr<T> (*open)()) {
    static std::mutex mu;
    static std::unique_ptr<T> value;
    std::lock_guard<std::mutex> lock(mu);
    if (!value)
        value = open();
    return *value;
}

} // namespace sj::cuda
