// The GPU's copy bandwidth, the bound the cuda backend's elementwise kernels are measured
// against (docs/gpu.md, docs/performance.md): cuMemcpyDtoD of a buffer of --mb MiB, best of
// --repeats, counting the bytes read and written. The driver is opened with dlopen as the
// backend opens it, so this builds everywhere and runs where there is a GPU.
// Prints one JSON line. Usage: gpu_bandwidth [--mb 1024] [--repeats 20] [--device 0]
#include <cuda.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dlfcn.h>
#include <string>

namespace {

void* g_lib = nullptr;

template <class F> F sym(const char* name) {
    void* p = dlsym(g_lib, name);
    if (!p) {
        std::fprintf(stderr, "gpu_bandwidth: libcuda.so.1 has no %s\n", name);
        std::exit(2);
    }
    return reinterpret_cast<F>(p);
}

void check(CUresult r, const char* what) {
    if (r == CUDA_SUCCESS)
        return;
    const char* s = nullptr;
    if (auto e = reinterpret_cast<CUresult (*)(CUresult, const char**)>(
            dlsym(g_lib, "cuGetErrorString")))
        e(r, &s);
    std::fprintf(stderr, "gpu_bandwidth: %s failed: %s\n", what, s ? s : "(unknown error)");
    std::exit(2);
}

} // namespace

int main(int argc, char** argv) {
    long mb = 1024, repeats = 20, ordinal = 0;
    for (int i = 1; i + 1 < argc; i += 2) {
        if (!std::strcmp(argv[i], "--mb"))
            mb = std::atol(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--repeats"))
            repeats = std::atol(argv[i + 1]);
        else if (!std::strcmp(argv[i], "--device"))
            ordinal = std::atol(argv[i + 1]);
        else {
            std::fprintf(stderr, "usage: %s [--mb MiB] [--repeats N] [--device ORDINAL]\n",
                         argv[0]);
            return 2;
        }
    }
    g_lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (!g_lib) {
        std::fprintf(stderr, "gpu_bandwidth: no NVIDIA driver (%s)\n", dlerror());
        return 2;
    }
    check(sym<CUresult (*)(unsigned)>("cuInit")(0), "cuInit");
    CUdevice dev;
    check(sym<CUresult (*)(CUdevice*, int)>("cuDeviceGet")(&dev, int(ordinal)), "cuDeviceGet");
    char name[256] = {};
    check(sym<CUresult (*)(char*, int, CUdevice)>("cuDeviceGetName")(name, sizeof name, dev),
          "cuDeviceGetName");
    CUcontext ctx;
    check(sym<CUresult (*)(CUcontext*, CUdevice)>("cuDevicePrimaryCtxRetain")(&ctx, dev),
          "cuDevicePrimaryCtxRetain");
    check(sym<CUresult (*)(CUcontext)>("cuCtxSetCurrent")(ctx), "cuCtxSetCurrent");
    auto alloc = sym<CUresult (*)(CUdeviceptr*, size_t)>("cuMemAlloc_v2");
    auto copy = sym<CUresult (*)(CUdeviceptr, CUdeviceptr, size_t)>("cuMemcpyDtoD_v2");
    auto sync = sym<CUresult (*)()>("cuCtxSynchronize");
    const size_t bytes = size_t(mb) << 20;
    CUdeviceptr a, b;
    check(alloc(&a, bytes), "cuMemAlloc");
    check(alloc(&b, bytes), "cuMemAlloc");
    check(copy(b, a, bytes), "cuMemcpyDtoD"); // warm up
    check(sync(), "cuCtxSynchronize");
    double best = 1e30;
    for (long r = 0; r < repeats; ++r) {
        auto t0 = std::chrono::steady_clock::now();
        check(copy(b, a, bytes), "cuMemcpyDtoD");
        check(sync(), "cuCtxSynchronize");
        double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (s < best)
            best = s;
    }
    std::printf("{\"bench\": \"gpu_bandwidth\", \"case\": \"copy\", \"impl\": \"cuMemcpyDtoD\", "
                "\"device\": \"%s\", \"bytes\": %zu, \"value\": %.1f, \"unit\": \"GB/s\"}\n",
                name, bytes, 2.0 * double(bytes) / best / 1e9);
    return 0;
}
