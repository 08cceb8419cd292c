// Devices of the cuda tests' own: the emulator with counters, and the seam that makes the cuda
// backend run on a given device for one scope.
#pragma once

#include "backend/Backend.h"
#include "backend/cuda/Device.h"
#include "backend/cuda/WindowCall.h"

#include <dlfcn.h>

#include <cstdint>
#include <map>
#include <memory>

namespace sj::test {

/// The emulator, counting the bytes uploaded to it and the window calls made on it.
class CountingEmulator final : public cuda::Device {
public:
    using DevicePtr = cuda::DevicePtr;
    const cuda::DeviceInfo& info() const override { return e_->info(); }
    DevicePtr alloc(size_t bytes) override { return e_->alloc(bytes); }
    void free(DevicePtr p) override { e_->free(p); }
    void upload(DevicePtr dst, const void* src, size_t bytes) override {
        uploaded += int64_t(bytes);
        e_->upload(dst, src, bytes);
    }
    void download(void* dst, DevicePtr src, size_t bytes) override {
        e_->download(dst, src, bytes);
    }
    void copy(DevicePtr dst, DevicePtr src, size_t bytes) override { e_->copy(dst, src, bytes); }
    void synchronize() override { e_->synchronize(); }
    std::shared_ptr<cuda::DeviceKernel> load(const cuda::GpuKernel& k) override {
        return e_->load(k);
    }
    void launch(const cuda::DeviceKernel& k, int64_t grid, int block, DevicePtr bufs,
                DevicePtr params) override {
        e_->launch(k, grid, block, bufs, params);
    }
    void gemm(const cuda::GemmArgs& g) override { e_->gemm(g); }
    void window(const cuda::WindowCall& c, DevicePtr a, DevicePtr b, DevicePtr out) override {
        ++windows[c.kind];
        e_->window(c, a, b, out);
    }
    int64_t uploaded = 0;
    std::map<cuda::WindowKind, int> windows;

private:
    std::shared_ptr<cuda::Device> e_ = cuda::make_emulator();
};

/// Makes the cuda backend run on `d` for one scope, through the plugin's test seam
/// (sj_cuda_set_test_device, looked up by name as a program that loads the plugin would).
class UseDevice {
public:
    explicit UseDevice(std::shared_ptr<cuda::Device> d) {
        detail::find_backend("cuda"); // loads the plugin
        void* h = dlopen("libsymjax_cuda.so", RTLD_NOW | RTLD_NOLOAD);
        set_ = h ? reinterpret_cast<Set>(dlsym(h, "sj_cuda_set_test_device")) : nullptr;
        if (set_)
            set_(&d);
    }
    ~UseDevice() {
        if (set_)
            set_(nullptr);
    }
    bool ok() const { return set_ != nullptr; }

private:
    using Set = void (*)(const std::shared_ptr<cuda::Device>*);
    Set set_ = nullptr;
};

} // namespace sj::test
