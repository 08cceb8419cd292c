// The CUDA driver API and cuBLAS opened with dlopen, and their errors as sj::Error.
#include "Driver.h"

#include <symjax/Error.h>

#include <dlfcn.h>

#include <memory>
#include <mutex>

namespace sj::cuda {

// Note [Loading the driver]
// libsymjax_cuda.so links neither libcuda nor cuBLAS: it opens them with dlopen when a function
// first asks for backend "cuda". The plugin then builds, loads and runs its emulator on machines
// without a GPU or a driver (CI, laptops), and a machine with a GPU needs only the driver that is
// installed there, not the toolkit we built against. libcuda.so.1 is the driver's ABI name (the
// unversioned libcuda.so in the toolkit is a link-time placeholder whose every call fails). We
// resolve each entry point by its exported name at the ABI version cuda.h's macros choose
// (cuMemAlloc_v2,
// ...), since dlsym sees the symbols and not the macros; cuda.h gives only types and enums here.
// What is loaded stays loaded for the life of the process (no dlclose: the driver does not
// support being unloaded under live contexts).

std::string dl_error() {
    const char* e = dlerror();
    return e ? e : "unknown error";
}

void* dl_symbol(void* h, const char* lib, const char* name) {
    void* p = dlsym(h, name);
    SJ_CHECK(p != nullptr, Error) << "backend \"cuda\": " << lib << " has no " << name
                                  << " (older than the CUDA 12 / cuDNN 9 this build expects?): "
                                  << dl_error();
    return p;
}

namespace {

std::unique_ptr<Driver> open_driver() {
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    SJ_CHECK(h != nullptr, Error)
        << "backend \"cuda\": no NVIDIA driver (dlopen libcuda.so.1: " << dl_error()
        << "); set SJ_CUDA_DEVICE=emulator to run the cuda backend's kernels on the host emulator";
    auto d = std::make_unique<Driver>();
    const char* lib = "libcuda.so.1";
#define SJ_RESOLVE(field, symbol) dl_resolve(h, lib, symbol, d->field)
    SJ_RESOLVE(init, "cuInit");
    SJ_RESOLVE(device_get_count, "cuDeviceGetCount");
    SJ_RESOLVE(device_get, "cuDeviceGet");
    SJ_RESOLVE(device_get_name, "cuDeviceGetName");
    SJ_RESOLVE(device_get_attribute, "cuDeviceGetAttribute");
    SJ_RESOLVE(device_total_mem, "cuDeviceTotalMem_v2");
    SJ_RESOLVE(primary_ctx_retain, "cuDevicePrimaryCtxRetain");
    SJ_RESOLVE(ctx_set_current, "cuCtxSetCurrent");
    SJ_RESOLVE(stream_create, "cuStreamCreate");
    SJ_RESOLVE(stream_synchronize, "cuStreamSynchronize");
    SJ_RESOLVE(mem_alloc, "cuMemAlloc_v2");
    SJ_RESOLVE(mem_free, "cuMemFree_v2");
    SJ_RESOLVE(mem_get_info, "cuMemGetInfo_v2");
    SJ_RESOLVE(memcpy_htod_async, "cuMemcpyHtoDAsync_v2");
    SJ_RESOLVE(memcpy_dtoh_async, "cuMemcpyDtoHAsync_v2");
    SJ_RESOLVE(memcpy_dtod_async, "cuMemcpyDtoDAsync_v2");
    SJ_RESOLVE(mem_host_alloc, "cuMemHostAlloc");
    SJ_RESOLVE(mem_free_host, "cuMemFreeHost");
    SJ_RESOLVE(module_load_data_ex, "cuModuleLoadDataEx");
    SJ_RESOLVE(module_get_function, "cuModuleGetFunction");
    SJ_RESOLVE(launch_kernel, "cuLaunchKernel");
    SJ_RESOLVE(get_error_name, "cuGetErrorName");
    SJ_RESOLVE(get_error_string, "cuGetErrorString");
#undef SJ_RESOLVE
    d->check(d->init(0), "cuInit");
    return d;
}

std::unique_ptr<Cublas> open_cublas() {
    // cuBLAS's soname carries its major version; 13 is the toolkit we build against, 12 has the
    // same entry points with the same signatures
    const char* names[] = {"libcublas.so.13", "libcublas.so.12"};
    void* h = nullptr;
    const char* lib = nullptr;
    std::string tried;
    for (const char* n : names) {
        h = dlopen(n, RTLD_NOW | RTLD_LOCAL);
        if (h) {
            lib = n;
            break;
        }
        tried += std::string(tried.empty() ? "" : "; ") + n + ": " + dl_error();
    }
    SJ_CHECK(h != nullptr, Error) << "backend \"cuda\": cannot open cuBLAS, which runs its "
                                     "matrix products ("
                                  << tried << ")";
    auto b = std::make_unique<Cublas>();
    dl_resolve(h, lib, "cublasCreate_v2", b->create);
    dl_resolve(h, lib, "cublasDestroy_v2", b->destroy);
    dl_resolve(h, lib, "cublasSetStream_v2", b->set_stream);
    dl_resolve(h, lib, "cublasSgemmStridedBatched", b->sgemm_strided_batched);
    dl_resolve(h, lib, "cublasDgemmStridedBatched", b->dgemm_strided_batched);
    b->get_status_name =
        reinterpret_cast<decltype(b->get_status_name)>(dlsym(h, "cublasGetStatusName"));
    return b;
}

} // namespace

std::string Driver::describe(CUresult r) const {
    const char* name = nullptr;
    const char* text = nullptr;
    if (get_error_name(r, &name) != CUDA_SUCCESS || !name)
        name = "unknown CUresult";
    if (get_error_string(r, &text) != CUDA_SUCCESS || !text)
        text = "no description";
    return std::string(name) + " (" + text + ", code " + std::to_string(int(r)) + ")";
}

void Driver::fail(CUresult r, const char* call) const {
    SJ_THROW(Error) << "backend \"cuda\": " << call << " failed: " << describe(r);
}

void Cublas::fail(cublasStatus_t s, const char* call) const {
    const char* name = get_status_name ? get_status_name(s) : nullptr;
    SJ_THROW(Error) << "backend \"cuda\": " << call
                    << " failed: " << (name ? name : "cublasStatus_t") << " (code " << int(s)
                    << ")";
}

const Driver& driver() {
    return open_once<Driver>(open_driver);
}

const Cublas& cublas() {
    return open_once<Cublas>(open_cublas);
}

} // namespace sj::cuda
