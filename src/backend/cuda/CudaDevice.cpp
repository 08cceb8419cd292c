// A GPU as a Device: the CUDA driver API (one primary context, one stream), the caching
// allocator, cuBLAS and cuDNN; and open_device(), which picks the device $SJ_CUDA_DEVICE names.
#include "CachingAllocator.h"
#include "Cudnn.h"
#include "Device.h"
#include "Driver.h"
#include "NvptxRenderer.h"

#include <symjax/Error.h>

#include "../../core/Debug.h"

#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

namespace sj::cuda {

namespace {

// Note [One stream]
// Everything a CudaDevice does is queued on one stream of the device's primary context: copies,
// kernels and GEMMs run in the order the runner queues them, which is what the caching allocator
// relies on to reuse a block (Note [Caching allocator]) and what lets the runner free a slot as
// soon as its last reader is queued. The primary context is the one the CUDA runtime uses too,
// so cuBLAS (a runtime library) works in it with no context juggling. Contexts are current per
// thread, so each entry point makes ours current on the calling thread (cuCtxSetCurrent is a
// cheap call), and a mutex serialises the device's users: Functions called from several threads
// share one stream. Overlapping copies with kernels (a second stream, events) can come later;
// correctness first.

class CudaKernel final : public DeviceKernel {
public:
    CUmodule module = nullptr;
    CUfunction fn = nullptr;
};

class CudaDevice final : public Device {
public:
    explicit CudaDevice(int ordinal) : drv_(driver()), ordinal_(ordinal) {
        drv_.check(drv_.device_get(&dev_, ordinal), "cuDeviceGet");
        char name[256] = {};
        drv_.check(drv_.device_get_name(name, int(sizeof name) - 1, dev_), "cuDeviceGetName");
        info_.name = name;
        auto attr = [&](CUdevice_attribute a, const char* what) {
            int v = 0;
            drv_.check(drv_.device_get_attribute(&v, a, dev_), what);
            return v;
        };
        info_.sm = 10 * attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                             "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MAJOR)") +
                   attr(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                        "cuDeviceGetAttribute(COMPUTE_CAPABILITY_MINOR)");
        info_.limits.multiprocessors = attr(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                            "cuDeviceGetAttribute(MULTIPROCESSOR_COUNT)");
        info_.limits.max_threads_per_block = attr(CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK,
                                                  "cuDeviceGetAttribute(MAX_THREADS_PER_BLOCK)");
        info_.limits.max_grid_x =
            attr(CU_DEVICE_ATTRIBUTE_MAX_GRID_DIM_X, "cuDeviceGetAttribute(MAX_GRID_DIM_X)");
        size_t total = 0;
        drv_.check(drv_.device_total_mem(&total, dev_), "cuDeviceTotalMem");
        info_.memory = int64_t(total);
        drv_.check(drv_.primary_ctx_retain(&ctx_, dev_), "cuDevicePrimaryCtxRetain");
        make_current();
        drv_.check(drv_.stream_create(&stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
        alloc_ = std::make_unique<CachingAllocator>(
            [this](size_t bytes) -> uint64_t {
                CUdeviceptr p = 0;
                CUresult r = drv_.mem_alloc(&p, bytes);
                if (r == CUDA_ERROR_OUT_OF_MEMORY)
                    return 0;
                drv_.check(r, "cuMemAlloc");
                return p;
            },
            [this](uint64_t p) {
                // a cached block may still be read by work queued before it was freed: the
                // flush waits for it (cuMemFree does not order itself after our stream)
                drv_.check(drv_.stream_synchronize(stream_), "cuStreamSynchronize");
                drv_.check(drv_.mem_free(CUdeviceptr(p)), "cuMemFree");
            },
            [this] { return describe_memory(); });
        if (detail::debug_level() >= 1)
            std::fprintf(stderr,
                         "[symjax] cuda device %d: %s, sm_%d, %d multiprocessors, %.1f GiB\n",
                         ordinal_, info_.name.c_str(), info_.sm, info_.limits.multiprocessors,
                         double(info_.memory) / double(1 << 30));
    }

    // (never destroyed: devices live in a process-wide cache until exit, Note [Loading the
    // driver])

    const DeviceInfo& info() const override { return info_; }

    DevicePtr alloc(size_t bytes) override {
        std::lock_guard<std::mutex> lock(mu_);
        make_current();
        return alloc_->alloc(bytes);
    }

    void free(DevicePtr p) override {
        std::lock_guard<std::mutex> lock(mu_);
        alloc_->free(p);
    }

    void upload(DevicePtr dst, const void* src, size_t bytes) override {
        if (bytes == 0)
            return;
        std::lock_guard<std::mutex> lock(mu_);
        make_current();
        if (const void* staged = stage(src, bytes))
            src = staged;
        drv_.check(drv_.memcpy_htod_async(CUdeviceptr(dst), src, bytes, stream_),
                   "cuMemcpyHtoDAsync");
    }

    void download(void* dst, DevicePtr src, size_t bytes) override {
        if (bytes == 0)
            return;
        std::lock_guard<std::mutex> lock(mu_);
        make_current();
        drv_.check(drv_.memcpy_dtoh_async(dst, CUdeviceptr(src), bytes, stream_),
                   "cuMemcpyDtoHAsync");
        sync_locked();
    }

    void copy(DevicePtr dst, DevicePtr src, size_t bytes) override {
        if (bytes == 0)
            return;
        std::lock_guard<std::mutex> lock(mu_);
        make_current();
        drv_.check(drv_.memcpy_dtod_async(CUdeviceptr(dst), CUdeviceptr(src), bytes, stream_),
                   "cuMemcpyDtoDAsync");
    }

    void synchronize() override {
        std::lock_guard<std::mutex> lock(mu_);
        make_current();
        sync_locked();
    }

    std::shared_ptr<DeviceKernel> load(const GpuKernel& k) override {
        const std::string key = k.str();
        std::lock_guard<std::mutex> lock(mu_);
        if (auto it = kernels_.find(key); it != kernels_.end())
            return it->second;
        make_current();
        const std::string ptx = cached_ptx(k, info_.sm); // Note [PTX cache]
        // ptxas runs inside the driver here: its log is the only explanation of a failure
        std::vector<char> error_log(16384, 0), info_log(4096, 0);
        CUjit_option opts[] = {CU_JIT_ERROR_LOG_BUFFER, CU_JIT_ERROR_LOG_BUFFER_SIZE_BYTES,
                               CU_JIT_INFO_LOG_BUFFER, CU_JIT_INFO_LOG_BUFFER_SIZE_BYTES};
        void* values[] = {error_log.data(),
                          reinterpret_cast<void*>(uintptr_t(error_log.size() - 1)), info_log.data(),
                          reinterpret_cast<void*>(uintptr_t(info_log.size() - 1))};
        auto kernel = std::make_shared<CudaKernel>();
        CUresult r = drv_.module_load_data_ex(&kernel->module, ptx.c_str(), 4, opts, values);
        SJ_CHECK(r == CUDA_SUCCESS, Error)
            << "backend \"cuda\": cuModuleLoadDataEx failed for a kernel on " << info_.name
            << " (sm_" << info_.sm << "): " << drv_.describe(r)
            << "\nptxas: " << (error_log[0] ? error_log.data() : "(no log)") << "\nkernel: " << key
            << "\n(SJ_DEBUG=4 prints the kernels' IR)";
        drv_.check(drv_.module_get_function(&kernel->fn, kernel->module, kKernelSymbol),
                   "cuModuleGetFunction");
        if (detail::debug_level() >= 4 && info_log[0])
            std::fprintf(stderr, "[symjax] ptxas: %s\n", info_log.data());
        kernels_.emplace(key, kernel);
        return kernel;
    }

    void launch(const DeviceKernel& k, int64_t grid, int block, DevicePtr bufs,
                DevicePtr params) override {
        SJ_ASSERT(grid >= 1 && grid <= info_.limits.max_grid_x && grid <= UINT_MAX && block >= 1 &&
                  block <= info_.limits.max_threads_per_block)
            << "cuda launch of " << grid << " blocks of " << block << " threads on " << info_.name;
        const auto& ck = static_cast<const CudaKernel&>(k);
        CUdeviceptr b = bufs, p = params;
        void* args[] = {&b, &p};
        std::lock_guard<std::mutex> lock(mu_);
        make_current();
        // 0 dynamic shared bytes: a Blocks kernel declares its tree as static shared memory
        drv_.check(drv_.launch_kernel(ck.fn, unsigned(grid), 1, 1, unsigned(block), 1, 1, 0,
                                      stream_, args, nullptr),
                   "cuLaunchKernel");
    }

    void gemm(const GemmArgs& g) override {
        for (int64_t v : {g.m, g.n, g.k, g.batch, g.lda, g.ldb, g.ldc})
            SJ_ASSERT(v >= 0 && v <= INT_MAX) << "cuda gemm: a size over INT_MAX (" << v << ")";
        std::lock_guard<std::mutex> lock(mu_);
        make_current();
        const Cublas& b = cublas();
        if (!blas_) {
            cublasHandle_t h = nullptr;
            b.check(b.create(&h), "cublasCreate");
            b.check(b.set_stream(h, stream_), "cublasSetStream");
            blas_ = h;
        }
        const cublasOperation_t ta = g.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N;
        const cublasOperation_t tb = g.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N;
        switch (g.dtype) {
        case DType::F32: {
            const float alpha = float(g.alpha), beta = float(g.beta);
            b.check(b.sgemm_strided_batched(
                        blas_, ta, tb, int(g.m), int(g.n), int(g.k), &alpha,
                        reinterpret_cast<const float*>(g.a), int(g.lda), g.stride_a,
                        reinterpret_cast<const float*>(g.b), int(g.ldb), g.stride_b, &beta,
                        reinterpret_cast<float*>(g.c), int(g.ldc), g.stride_c, int(g.batch)),
                    "cublasSgemmStridedBatched");
            return;
        }
        case DType::F64:
            b.check(b.dgemm_strided_batched(
                        blas_, ta, tb, int(g.m), int(g.n), int(g.k), &g.alpha,
                        reinterpret_cast<const double*>(g.a), int(g.lda), g.stride_a,
                        reinterpret_cast<const double*>(g.b), int(g.ldb), g.stride_b, &g.beta,
                        reinterpret_cast<double*>(g.c), int(g.ldc), g.stride_c, int(g.batch)),
                    "cublasDgemmStridedBatched");
            return;
        case DType::Bool:
        case DType::U8:
        case DType::I32:
        case DType::I64:
        case DType::U32:
            break;
        }
        SJ_THROW(InternalError) << "cuda gemm of " << dtype_name(g.dtype)
                                << " (the runner asks for f32 and f64 only)";
    }

    void window(const WindowCall& c, DevicePtr a, DevicePtr b, DevicePtr out) override {
        std::lock_guard<std::mutex> lock(mu_);
        make_current();
        if (!dnn_) // workspaces from our allocator (we hold mu_: not through alloc())
            dnn_ = std::make_unique<CudnnSession>(
                stream_, [this](size_t bytes) { return alloc_->alloc(bytes); },
                [this](DevicePtr p) { alloc_->free(p); });
        dnn_->run(c, a, b, out);
    }

    /// "NVIDIA H200: 3.2 GiB free of 139.8 GiB" (for out-of-memory errors).
    std::string describe_memory() const {
        size_t free_b = 0, total_b = 0;
        if (drv_.mem_get_info(&free_b, &total_b) != CUDA_SUCCESS)
            return info_.name + ": free memory unknown";
        char line[160];
        std::snprintf(line, sizeof line, "%s (device %d): %.2f GiB free of %.2f GiB",
                      info_.name.c_str(), ordinal_, double(free_b) / double(1 << 30),
                      double(total_b) / double(1 << 30));
        return line;
    }

private:
    /// Makes our context current on the calling thread. Every time, not once per thread: other
    /// code in the process (another CUDA library) may have made its own current since.
    void make_current() { drv_.check(drv_.ctx_set_current(ctx_), "cuCtxSetCurrent"); }

    void sync_locked() {
        CUresult r = drv_.stream_synchronize(stream_);
        SJ_CHECK(r == CUDA_SUCCESS, Error)
            << "backend \"cuda\": the device reported an error for work queued earlier (a kernel, "
               "a copy or a GEMM): "
            << drv_.describe(r)
            << " (the context may be unusable now: most such errors are sticky in CUDA)";
        staging_used_ = 0; // every staged copy has been read
    }

    // Note [Staging uploads]
    // A small upload (a kernel's argument block, a scalar, a bias) is copied into a pinned ring
    // of kStagingBytes and the device copies it from there: a copy from pinned memory is truly
    // asynchronous, and the caller's bytes are free to change at once. When the ring is full we
    // wait for the stream (every copy queued from the ring has then run) and start again at its
    // beginning; events would let us wait for less, but a ring this size fills only on calls with
    // thousands of small uploads. Large uploads read the caller's pageable memory directly (the
    // driver stages those itself). If the pinned ring cannot be allocated, everything does.

    /// src's bytes copied into the pinned ring, or null when the upload does not go through it.
    const void* stage(const void* src, size_t bytes) {
        if (bytes > kStagedMax || staging_failed_)
            return nullptr;
        if (!staging_) {
            void* p = nullptr;
            if (drv_.mem_host_alloc(&p, kStagingBytes, 0) != CUDA_SUCCESS || !p) {
                staging_failed_ = true;
                return nullptr;
            }
            staging_ = static_cast<char*>(p);
        }
        size_t at = (staging_used_ + 255) / 256 * 256;
        if (at + bytes > kStagingBytes) {
            sync_locked();
            at = 0;
        }
        std::memcpy(staging_ + at, src, bytes);
        staging_used_ = at + bytes;
        return staging_ + at;
    }

    static constexpr size_t kStagingBytes = size_t(4) << 20; // the pinned ring
    static constexpr size_t kStagedMax = size_t(256) << 10;  // uploads up to this size use it
    char* staging_ = nullptr;
    size_t staging_used_ = 0;
    bool staging_failed_ = false;

    const Driver& drv_;
    int ordinal_;
    CUdevice dev_ = 0;
    CUcontext ctx_ = nullptr;
    CUstream stream_ = nullptr;
    cublasHandle_t blas_ = nullptr;
    std::unique_ptr<CudnnSession> dnn_; // made at the first window call
    DeviceInfo info_;
    std::unique_ptr<CachingAllocator> alloc_;
    std::mutex mu_; // Note [One stream] (the allocator's callbacks call the driver, not us)
    std::unordered_map<std::string, std::shared_ptr<CudaKernel>> kernels_;
};

/// $SJ_CUDA_DEVICE: the GPU ordinal (default 0), or -1 for the emulator, -2 for the emulator
/// with an H200's launch limits.
int requested_device() {
    const char* e = std::getenv("SJ_CUDA_DEVICE");
    if (!e || !*e)
        return 0;
    const std::string s = e;
    if (s == "emulator")
        return -1;
    if (s == "emulator-h200")
        return -2;
    bool digits = s.size() <= 6;
    for (char c : s)
        digits = digits && c >= '0' && c <= '9';
    SJ_CHECK(digits, Error) << "SJ_CUDA_DEVICE='" << s
                            << "' is not a device: expected a GPU ordinal (0, 1, ...: unset means "
                               "0), \"emulator\" (the host emulator of the cuda backend) or "
                               "\"emulator-h200\" (the emulator with an H200's launch limits)";
    return std::atoi(s.c_str());
}

/// The device sj_cuda_set_test_device installed (null: none).
std::shared_ptr<Device>& test_device() {
    static std::shared_ptr<Device> d;
    return d;
}
std::mutex g_test_device_mu;

} // namespace

std::shared_ptr<Device> open_device() {
    {
        std::lock_guard<std::mutex> lock(g_test_device_mu);
        if (test_device())
            return test_device();
    }
    const int ordinal = requested_device();
    // one Device per ordinal for the process: its kernels, cached blocks and cuBLAS handle are
    // shared by every function. Never destroyed (Note [Loading the driver]): tearing down a
    // context from a static destructor races the driver's own exit handlers.
    static std::mutex mu;
    static auto* devices = new std::map<int, std::shared_ptr<Device>>();
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = devices->find(ordinal); it != devices->end())
        return it->second;
    std::shared_ptr<Device> d;
    if (ordinal < 0) {
        d = ordinal == -1 ? make_emulator() : make_emulator_h200();
    } else {
        const Driver& drv = driver();
        int count = 0;
        drv.check(drv.device_get_count(&count), "cuDeviceGetCount");
        SJ_CHECK(count > 0, Error)
            << "backend \"cuda\": the NVIDIA driver is installed but sees no GPU; set "
               "SJ_CUDA_DEVICE=emulator to run the cuda backend's kernels on the host emulator";
        SJ_CHECK(ordinal < count, Error)
            << "backend \"cuda\": SJ_CUDA_DEVICE=" << ordinal << " but the driver sees " << count
            << (count == 1 ? " GPU" : " GPUs") << " (ordinals 0 to " << count - 1 << ")";
        d = std::make_shared<CudaDevice>(ordinal);
    }
    devices->emplace(ordinal, d);
    return d;
}

} // namespace sj::cuda

/// A test seam, found with dlsym: makes open_device() return *d (null: stop) instead of what
/// $SJ_CUDA_DEVICE names, so that a test runs the cuda runner on a Device of its own (host
/// memory, naive GEMMs) on any machine (tests/unit/CudaRuntimeTest.cpp).
extern "C" __attribute__((visibility("default"))) void
sj_cuda_set_test_device(const std::shared_ptr<sj::cuda::Device>* d) {
    std::lock_guard<std::mutex> lock(sj::cuda::g_test_device_mu);
    sj::cuda::test_device() = d ? *d : nullptr;
}
