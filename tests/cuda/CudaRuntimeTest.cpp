// The cuda backend's runtime without a GPU: the caching allocator on fake device memory, the
// dot_general -> GEMM mapping against naive loops, the errors of the plugin's loading and device
// selection, and the runner on a host Device of the test's own (src/backend/cuda/, docs/gpu.md).
#include "TestUtil.h"

#include "backend/Backend.h"
#include "backend/cuda/CachingAllocator.h"
#include "backend/cuda/DotGemm.h"
#include "cuda/TestDevices.h"

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <limits>
#include <map>
#include <optional>

using namespace sj;
using namespace sj::cuda;
using sj::test::values;

namespace {

/// Device memory of a fixed capacity, as the allocator's two callbacks see it: addresses that
/// never repeat, and a count of what was asked and returned.
struct FakeDevice {
    size_t capacity = size_t(1) << 40;
    size_t used = 0;
    uint64_t next = 0x10000;
    std::map<uint64_t, size_t> live; // raw blocks
    std::vector<size_t> asked;       // sizes of every raw allocation tried
    std::vector<uint64_t> freed;

    CachingAllocator allocator() { // (the allocator keeps pointers to this device)
        return CachingAllocator(
            [this](size_t bytes) -> uint64_t {
                asked.push_back(bytes);
                if (used + bytes > capacity)
                    return 0;
                used += bytes;
                const uint64_t p = next;
                next += bytes + 0x1000;
                live[p] = bytes;
                return p;
            },
            [this](uint64_t p) {
                used -= live.at(p);
                live.erase(p);
                freed.push_back(p);
            },
            [] { return std::string("fake device: 0 bytes free"); });
    }
};

} // namespace

TEST(CudaRuntimeAllocator, RoundsUpTo512Bytes) {
    EXPECT_EQ(CachingAllocator::round(0), 512u); // every block distinct and non-null
    EXPECT_EQ(CachingAllocator::round(1), 512u);
    EXPECT_EQ(CachingAllocator::round(512), 512u);
    EXPECT_EQ(CachingAllocator::round(513), 1024u);
    EXPECT_EQ(CachingAllocator::round(100000), 100352u); // 196 * 512
    FakeDevice dev;
    CachingAllocator a = dev.allocator(); // (C++17: no copy or move)
    const uint64_t p = a.alloc(1000);
    ASSERT_EQ(dev.asked, std::vector<size_t>{1024});
    EXPECT_EQ(a.block_size(p), 1024u);
    EXPECT_EQ(a.stats().in_use, 1024);
}

TEST(CudaRuntimeAllocator, ReusesFreedBlocksWithoutTheDevice) {
    FakeDevice dev;
    CachingAllocator a = dev.allocator(); // (C++17: no copy or move)
    const uint64_t p = a.alloc(1000);
    a.free(p);
    EXPECT_EQ(a.stats().in_use, 0);
    EXPECT_EQ(a.stats().cached, 1024);
    EXPECT_TRUE(dev.freed.empty()); // kept, not returned
    // a request that rounds to the same size gets the same block, with no raw allocation
    EXPECT_EQ(a.alloc(600), p);
    EXPECT_EQ(dev.asked.size(), 1u);
    EXPECT_EQ(a.stats().reuses, 1);
    EXPECT_EQ(a.stats().cached, 0);
    EXPECT_EQ(a.stats().in_use, 1024);
    // while it is in use, a second request needs a block of its own
    const uint64_t q = a.alloc(600);
    EXPECT_NE(q, p);
    EXPECT_EQ(dev.asked.size(), 2u);
    EXPECT_EQ(a.stats().peak, 2048);
    a.free(p);
    a.free(q);
    a.empty_cache();
    EXPECT_EQ(dev.freed.size(), 2u);
    EXPECT_TRUE(dev.live.empty());
    EXPECT_EQ(a.stats().cached, 0);
}

TEST(CudaRuntimeAllocator, BestFitAndNoBlockOverTwiceTheRequest) {
    FakeDevice dev;
    CachingAllocator a = dev.allocator(); // (C++17: no copy or move)
    const uint64_t b1 = a.alloc(1024), b4 = a.alloc(4096), b2 = a.alloc(2048);
    a.free(b1);
    a.free(b4);
    a.free(b2);
    const size_t raw = dev.asked.size();
    // 1500 -> 1536: the 2048 block is the smallest that fits (not the 4096 one)
    EXPECT_EQ(a.alloc(1500), b2);
    // 600 -> 1024: the 1024 block
    EXPECT_EQ(a.alloc(600), b1);
    EXPECT_EQ(dev.asked.size(), raw);
    // only the 4096 block is left: 1024 would waste more than half of it, so a new block
    const uint64_t n = a.alloc(1024);
    EXPECT_NE(n, b4);
    ASSERT_EQ(dev.asked.size(), raw + 1);
    EXPECT_EQ(dev.asked.back(), 1024u);
    // exactly twice the request is still allowed
    EXPECT_EQ(a.alloc(2048), b4);
    EXPECT_EQ(dev.asked.size(), raw + 1);
}

TEST(CudaRuntimeAllocator, FlushesTheCacheAndRetriesOnceWhenTheDeviceIsFull) {
    FakeDevice dev;
    dev.capacity = 6144;
    CachingAllocator a = dev.allocator(); // (C++17: no copy or move)
    const uint64_t in_use = a.alloc(2048);
    const uint64_t cached = a.alloc(2048);
    a.free(cached);
    // 3072 fits no cached block; the device has 2048 left: fail, flush the 2048 cached, retry
    const uint64_t p = a.alloc(3072);
    EXPECT_NE(p, 0u);
    EXPECT_EQ(dev.asked, (std::vector<size_t>{2048, 2048, 3072, 3072}));
    EXPECT_EQ(dev.freed, std::vector<uint64_t>{cached});
    EXPECT_EQ(a.stats().cached, 0);
    EXPECT_EQ(a.stats().in_use, 2048 + 3072);
    EXPECT_EQ(a.stats().raw_frees, 1);
    a.free(in_use);
    a.free(p);
}

TEST(CudaRuntimeAllocator, OutOfMemoryNamesAskedCachedAndInUse) {
    FakeDevice dev;
    dev.capacity = 4096;
    CachingAllocator a = dev.allocator(); // (C++17: no copy or move)
    a.alloc(2048);
    a.free(a.alloc(1024));
    std::string m = test::message_of<OutOfMemoryError>([&] { a.alloc(4000); });
    EXPECT_CONTAINS(m, "4000 bytes (4096 rounded)");
    EXPECT_CONTAINS(m, "1024 bytes were cached");
    EXPECT_CONTAINS(m, "2048 bytes are in use");
    EXPECT_CONTAINS(m, "fake device: 0 bytes free");
    // tried, flushed, tried once more: no third attempt
    EXPECT_EQ(dev.asked, (std::vector<size_t>{2048, 1024, 4096, 4096}));
    EXPECT_EQ(a.stats().cached, 0);
    EXPECT_EQ(a.stats().in_use, 2048);
    // the allocator still works after the error
    EXPECT_NE(a.alloc(1024), 0u);
}

TEST(CudaRuntimeAllocator, FreeOfAnUnknownAddressIsAnInternalError) {
    FakeDevice dev;
    CachingAllocator a = dev.allocator(); // (C++17: no copy or move)
    const uint64_t p = a.alloc(10);
    a.free(p);
    EXPECT_THROW(a.free(p), InternalError); // twice
    EXPECT_THROW(a.free(12345), InternalError);
    a.free(0); // null, as free(nullptr)
}

// ---- dot_general as a GEMM -----------------------------------------------------------------

namespace {

std::vector<int64_t> strides_of(const Shape& s) {
    std::vector<int64_t> st(s.size(), 1);
    for (size_t i = s.size(); i-- > 1;)
        st[i - 1] = st[i] * s[i];
    return st;
}

bool contains(const std::vector<int64_t>& v, int64_t x) {
    return std::find(v.begin(), v.end(), x) != v.end();
}

/// Calls f(index) for each multi-index of a shape, row-major order.
template <class F> void for_each_index(const Shape& s, F f) {
    if (numel(s) == 0)
        return;
    std::vector<int64_t> i(s.size(), 0);
    while (true) {
        f(i);
        size_t d = s.size();
        while (d > 0 && ++i[d - 1] == s[d - 1])
            i[--d] = 0;
        if (d == 0)
            return;
    }
}

/// dot_general by its definition: result [batch..., lhs free..., rhs free...], each element
/// the sum over the contracted indices.
std::vector<double> naive_dot(const std::vector<double>& L, const Shape& ls,
                              const std::vector<double>& R, const Shape& rs, const DotAttrs& d,
                              Shape* out_shape) {
    std::vector<int64_t> lfree, rfree;
    for (int64_t i = 0; i < int64_t(ls.size()); ++i)
        if (!contains(d.lhs_batch, i) && !contains(d.lhs_contract, i))
            lfree.push_back(i);
    for (int64_t i = 0; i < int64_t(rs.size()); ++i)
        if (!contains(d.rhs_batch, i) && !contains(d.rhs_contract, i))
            rfree.push_back(i);
    Shape os, cs;
    for (int64_t b : d.lhs_batch)
        os.push_back(ls[size_t(b)]);
    for (int64_t f : lfree)
        os.push_back(ls[size_t(f)]);
    for (int64_t f : rfree)
        os.push_back(rs[size_t(f)]);
    for (int64_t c : d.lhs_contract)
        cs.push_back(ls[size_t(c)]);
    *out_shape = os;
    const auto lst = strides_of(ls), rst = strides_of(rs);
    std::vector<double> out;
    for_each_index(os, [&](const std::vector<int64_t>& o) {
        double sum = 0;
        for_each_index(cs, [&](const std::vector<int64_t>& c) {
            int64_t lo = 0, ro = 0;
            size_t k = 0;
            for (size_t i = 0; i < d.lhs_batch.size(); ++i, ++k) {
                lo += o[k] * lst[size_t(d.lhs_batch[i])];
                ro += o[k] * rst[size_t(d.rhs_batch[i])];
            }
            for (int64_t f : lfree)
                lo += o[k++] * lst[size_t(f)];
            for (int64_t f : rfree)
                ro += o[k++] * rst[size_t(f)];
            for (size_t i = 0; i < c.size(); ++i) {
                lo += c[i] * lst[size_t(d.lhs_contract[i])];
                ro += c[i] * rst[size_t(d.rhs_contract[i])];
            }
            sum += L[size_t(lo)] * R[size_t(ro)];
        });
        out.push_back(sum);
    });
    if (numel(os) == 0)
        out.clear();
    return out;
}

/// A column-major strided batched GEMM as BLAS defines it (C = alpha op(A) op(B) + beta C, C
/// not read when beta is 0), on host memory at the addresses g names, elements of type T.
template <class T = double> void host_gemm(const GemmArgs& g) {
    const auto* A = reinterpret_cast<const T*>(g.a);
    const auto* B = reinterpret_cast<const T*>(g.b);
    auto* C = reinterpret_cast<T*>(g.c);
    for (int64_t p = 0; p < g.batch; ++p)
        for (int64_t i = 0; i < g.m; ++i)
            for (int64_t j = 0; j < g.n; ++j) {
                double sum = 0;
                for (int64_t l = 0; l < g.k; ++l) {
                    const double a = g.trans_a ? A[p * g.stride_a + l + i * g.lda]
                                               : A[p * g.stride_a + i + l * g.lda];
                    const double b = g.trans_b ? B[p * g.stride_b + j + l * g.ldb]
                                               : B[p * g.stride_b + l + j * g.ldb];
                    sum += a * b;
                }
                T& c = C[p * g.stride_c + i + j * g.ldc];
                c = T(g.beta == 0 ? g.alpha * sum : g.alpha * sum + g.beta * double(c));
            }
}

struct DotCase {
    Shape lhs, rhs;
    DotAttrs dims;
};

/// gemm_for on the case, run by host_gemm, equals naive_dot exactly (small integers).
void expect_gemm_matches(const DotCase& c, const std::string& what) {
    std::vector<double> L(size_t(numel(c.lhs))), R(size_t(numel(c.rhs)));
    for (size_t i = 0; i < L.size(); ++i)
        L[i] = double(int64_t(i * 7 % 11) - 5);
    for (size_t i = 0; i < R.size(); ++i)
        R[i] = double(int64_t(i * 5 % 13) - 6);
    Shape os;
    const std::vector<double> want = naive_dot(L, c.lhs, R, c.rhs, c.dims, &os);
    std::vector<double> C(size_t(numel(os)), std::numeric_limits<double>::quiet_NaN());
    std::optional<GemmArgs> g =
        gemm_for(c.dims, c.lhs, c.rhs, DType::F64, reinterpret_cast<uint64_t>(L.data()),
                 reinterpret_cast<uint64_t>(R.data()), reinterpret_cast<uint64_t>(C.data()));
    ASSERT_TRUE(g.has_value()) << what;
    EXPECT_EQ(g->dtype, DType::F64);
    EXPECT_EQ(g->m * g->n * g->batch, numel(os)) << what;
    ASSERT_GT(g->k, 0) << what;
    // BLAS's argument rules
    EXPECT_GE(g->lda, std::max<int64_t>(1, g->trans_a ? g->k : g->m)) << what;
    EXPECT_GE(g->ldb, std::max<int64_t>(1, g->trans_b ? g->n : g->k)) << what;
    EXPECT_GE(g->ldc, std::max<int64_t>(1, g->m)) << what;
    host_gemm(*g);
    ASSERT_EQ(C.size(), want.size()) << what;
    for (size_t i = 0; i < C.size(); ++i)
        ASSERT_EQ(C[i], want[i]) << what << " at " << i;
}

DotAttrs dims(std::vector<int64_t> lb, std::vector<int64_t> rb, std::vector<int64_t> lc,
              std::vector<int64_t> rc) {
    DotAttrs d;
    d.lhs_batch = std::move(lb);
    d.rhs_batch = std::move(rb);
    d.lhs_contract = std::move(lc);
    d.rhs_contract = std::move(rc);
    return d;
}

} // namespace

TEST(CudaRuntimeGemm, MatrixProductsInEveryTransposition) {
    expect_gemm_matches({{3, 4}, {4, 5}, dims({}, {}, {1}, {0})}, "A B");
    expect_gemm_matches({{4, 3}, {4, 5}, dims({}, {}, {0}, {0})}, "A^T B");
    expect_gemm_matches({{3, 4}, {5, 4}, dims({}, {}, {1}, {1})}, "A B^T");
    expect_gemm_matches({{4, 3}, {5, 4}, dims({}, {}, {0}, {1})}, "A^T B^T");
    // the layouts BLAS sees for each: (trans_a, trans_b) = (rhs transposed, lhs transposed)
    auto g = gemm_for(dims({}, {}, {1}, {0}), {3, 4}, {4, 5}, DType::F32);
    ASSERT_TRUE(g);
    EXPECT_EQ(g->m, 5); // C^T is N x M
    EXPECT_EQ(g->n, 3);
    EXPECT_EQ(g->k, 4);
    EXPECT_FALSE(g->trans_a);
    EXPECT_FALSE(g->trans_b);
    EXPECT_EQ(g->lda, 5);
    EXPECT_EQ(g->ldb, 4);
    EXPECT_EQ(g->ldc, 5);
    g = gemm_for(dims({}, {}, {0}, {1}), {4, 3}, {5, 4}, DType::F32);
    ASSERT_TRUE(g);
    EXPECT_TRUE(g->trans_a);
    EXPECT_TRUE(g->trans_b);
}

TEST(CudaRuntimeGemm, VectorsAndOuterProducts) {
    expect_gemm_matches({{4}, {4}, dims({}, {}, {0}, {0})}, "dot");
    expect_gemm_matches({{3, 4}, {4}, dims({}, {}, {1}, {0})}, "matrix-vector");
    expect_gemm_matches({{4}, {4, 5}, dims({}, {}, {0}, {0})}, "vector-matrix");
    expect_gemm_matches({{3}, {5}, dims({}, {}, {}, {})}, "outer product (k = 1)");
    expect_gemm_matches({{1, 3, 1, 4}, {4, 1, 5}, dims({}, {}, {3}, {0})}, "size-1 dims");
}

TEST(CudaRuntimeGemm, BatchesAndGroupsOfDims) {
    expect_gemm_matches({{2, 3, 4}, {2, 4, 5}, dims({0}, {0}, {2}, {1})}, "batched");
    expect_gemm_matches({{2, 4, 3}, {2, 5, 4}, dims({0}, {0}, {1}, {2})}, "batched, transposed");
    expect_gemm_matches({{3, 2, 4}, {2, 4, 5}, dims({1}, {0}, {2}, {1})},
                        "batch dim between the free and contracted dims");
    expect_gemm_matches({{2, 3, 2, 3, 4}, {2, 3, 4, 5}, dims({0, 1}, {0, 1}, {4}, {2})},
                        "two batch dims (the lhs's collapse, with a free dim of its own)");
    expect_gemm_matches({{3, 2, 2}, {2, 2, 5}, dims({}, {}, {1, 2}, {0, 1})},
                        "two contracted dims");
    expect_gemm_matches({{2, 3, 4}, {4, 5}, dims({}, {}, {2}, {0})}, "two free dims on the lhs");
    expect_gemm_matches({{4, 2, 3}, {4, 5}, dims({}, {}, {0}, {0})},
                        "two free dims on the lhs, transposed");
}

TEST(CudaRuntimeGemm, DimsThatDoNotFitOneGemmAreDeclined) {
    // free dims of the rhs on both sides of the contracted one
    EXPECT_FALSE(gemm_for(dims({}, {}, {1}, {1}), {3, 4}, {5, 4, 6}, DType::F32));
    // contracted dims in an order that does not flatten the same on both sides
    EXPECT_FALSE(gemm_for(dims({}, {}, {2, 1}, {1, 0}), {3, 2, 2}, {2, 2, 5}, DType::F32));
    // the rhs's batch dim innermost: neither its N nor its K dim is contiguous
    EXPECT_FALSE(gemm_for(dims({0}, {2}, {2}, {0}), {2, 3, 4}, {4, 5, 2}, DType::F32));
    // not f32 or f64
    EXPECT_FALSE(gemm_for(dims({}, {}, {1}, {0}), {3, 4}, {4, 5}, DType::I32));
    // over INT_MAX rows
    EXPECT_FALSE(gemm_for(dims({}, {}, {1}, {0}), {int64_t(1) << 32, 2}, {2, 2}, DType::F32));
}

TEST(CudaRuntimeGemm, EmptyOperandsAreLeftToTheCaller) {
    auto g = gemm_for(dims({}, {}, {1}, {0}), {0, 4}, {4, 5}, DType::F32);
    ASSERT_TRUE(g);
    EXPECT_EQ(g->n, 0); // M: nothing to compute
    g = gemm_for(dims({}, {}, {1}, {0}), {3, 0}, {0, 5}, DType::F64);
    ASSERT_TRUE(g);
    EXPECT_EQ(g->k, 0); // zeros to write
    EXPECT_EQ(g->m * g->n, 15);
}

// ---- loading the plugin and choosing a device ------------------------------------------------

namespace {

using sj::test::ScopedEnv;

std::string cuda_function_error() {
    Placeholder x({3}, f32, "x");
    return test::message_of<Error>([&] { function({x}, {x * 2.0f}, {}, test::on("cuda")); });
}

} // namespace

TEST(CudaRuntimeBackend, UnknownBackendListsTheKnownOnesAndThePluginTried) {
    Placeholder x({3}, f32, "x");
    std::string m =
        test::message_of<Error>([&] { function({x}, {x * 2.0f}, {}, test::on("nosuch")); });
    EXPECT_CONTAINS(m, "unknown backend 'nosuch'");
    EXPECT_CONTAINS(m, "cpu");
    EXPECT_CONTAINS(m, "reference");
    EXPECT_CONTAINS(m, "libsymjax_nosuch.so");
    // asked again: the same answer, from the first attempt
    EXPECT_EQ(test::message_of<Error>([&] { function({x}, {x * 2.0f}, {}, test::on("nosuch")); }),
              m);
    // a name that is not a plain word loads nothing
    m = test::message_of<Error>([&] { function({x}, {x * 2.0f}, {}, test::on("../evil")); });
    EXPECT_CONTAINS(m, "unknown backend '../evil'");
    EXPECT_CONTAINS(m, "no plugin tried");
}

TEST(CudaRuntimeBackend, WithoutADriverTheErrorSaysSoAndPointsToTheEmulator) {
    ScopedEnv env("SJ_CUDA_DEVICE", nullptr);
    if (void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL)) {
        // a machine with a driver (the GPU runs): GPU 0 opens, and a function compiles there
        dlclose(h);
        Placeholder x({4}, f32, "x");
        EXPECT_NO_THROW(function({x}, {x * 2.0f}, {}, test::on("cuda")));
        return;
    }
    const std::string m = cuda_function_error();
    EXPECT_CONTAINS(m, "no NVIDIA driver");
    EXPECT_CONTAINS(m, "libcuda.so.1");
    EXPECT_CONTAINS(m, "SJ_CUDA_DEVICE=emulator");
    // the plugin was found beside libsymjax and registered itself: only the device is missing
    const auto names = available_backends();
    EXPECT_NE(std::find(names.begin(), names.end(), "cuda"), names.end());
}

TEST(CudaRuntimeBackend, ABadDeviceNameListsTheAcceptedValues) {
    ScopedEnv env("SJ_CUDA_DEVICE", "bogus");
    const std::string m = cuda_function_error();
    EXPECT_CONTAINS(m, "SJ_CUDA_DEVICE='bogus'");
    EXPECT_CONTAINS(m, "GPU ordinal");
    EXPECT_CONTAINS(m, "\"emulator\"");
    EXPECT_CONTAINS(m, "\"emulator-h200\"");
}

// SJ_CUDA_DEVICE=emulator-h200: the emulator with an H200's launch limits, so that launches
// (block widths, grids, split chunk counts) are the GPU's; plain "emulator" keeps small ones.
TEST(CudaRuntimeBackend, TheH200EmulatorHasTheGpusLaunchLimits) {
    const cuda::DeviceLimits h200 = cuda::make_emulator_h200()->info().limits, gpu{};
    EXPECT_EQ(h200.multiprocessors, gpu.multiprocessors);
    EXPECT_EQ(h200.max_threads_per_block, gpu.max_threads_per_block);
    EXPECT_EQ(cuda::make_emulator()->info().limits.max_threads_per_block, 64);
    ScopedEnv env("SJ_CUDA_DEVICE", "emulator-h200");
    EXPECT_EQ(cuda::open_device()->info().name, "emulator-h200");
}

// ---- the runner on a device of the test's own ----------------------------------------------

namespace {

/// A Device in host memory whose GEMMs are naive loops and which has no kernels: enough for
/// programs of dot_general, views and host fallbacks, and it counts what it holds.
class HostDevice final : public Device {
public:
    HostDevice() { info_.name = "host test device"; }
    const DeviceInfo& info() const override { return info_; }
    DevicePtr alloc(size_t bytes) override {
        auto p = std::make_unique<unsigned char[]>(std::max<size_t>(bytes, 1));
        const auto a = reinterpret_cast<DevicePtr>(p.get());
        live_[a] = std::move(p);
        return a;
    }
    void free(DevicePtr p) override {
        if (p && !live_.erase(p))
            throw InternalError("host test device: free of an unknown address");
    }
    void upload(DevicePtr dst, const void* src, size_t bytes) override {
        std::memcpy(reinterpret_cast<void*>(dst), src, bytes);
        ++uploads;
    }
    void download(void* dst, DevicePtr src, size_t bytes) override {
        std::memcpy(dst, reinterpret_cast<const void*>(src), bytes);
        ++downloads;
    }
    void copy(DevicePtr dst, DevicePtr src, size_t bytes) override {
        std::memcpy(reinterpret_cast<void*>(dst), reinterpret_cast<const void*>(src), bytes);
    }
    void synchronize() override {}
    /// Kernels: what the test's on_launch does in their place (none: no kernels).
    struct HostKernel final : DeviceKernel {
        GpuKernel code;
    };
    std::shared_ptr<DeviceKernel> load(const GpuKernel& k) override {
        if (!on_launch)
            throw Error("host test device: no kernels");
        ++loads;
        auto h = std::make_shared<HostKernel>();
        h->code = k;
        return h;
    }
    void launch(const DeviceKernel& k, int64_t grid, int block, DevicePtr bufs,
                DevicePtr params) override {
        if (!on_launch)
            throw Error("host test device: no kernels");
        ++launches;
        on_launch(static_cast<const HostKernel&>(k).code, grid, block, bufs, params);
    }
    std::function<void(const GpuKernel&, int64_t, int, DevicePtr, DevicePtr)> on_launch;
    int loads = 0, launches = 0;
    void gemm(const GemmArgs& g) override {
        if (fail_gemm)
            throw Error("host test device: injected GEMM failure");
        ++gemms;
        if (g.dtype == DType::F64)
            host_gemm<double>(g);
        else
            host_gemm<float>(g);
    }
    void window(const WindowCall&, DevicePtr, DevicePtr, DevicePtr) override {
        throw Error("host test device: no window calls");
    }
    size_t live() const { return live_.size(); }
    int gemms = 0, uploads = 0, downloads = 0;
    bool fail_gemm = false;

private:
    DeviceInfo info_;
    std::map<DevicePtr, std::unique_ptr<unsigned char[]>> live_;
};

} // namespace

TEST(CudaRuntimeRunner, GemmsViewsAndHostFallbacksOnATestDevice) {
    auto dev = std::make_shared<HostDevice>();
    test::UseDevice use(dev);
    ASSERT_TRUE(use.ok()) << "libsymjax_cuda.so has no sj_cuda_set_test_device";
    Placeholder a({2, 3, 4}, f64, "a"), b({2, 4, 5}, f64, "b"), s({3, 3}, f64, "s"),
        c({3, 4}, f64, "c"), r({5, 4, 6}, f64, "r");
    const DotAttrs batched = dims({0}, {0}, {2}, {1}), plain = dims({}, {}, {1}, {0}),
                   split = dims({}, {}, {1}, {1});
    auto dot = [](const Tensor& x, const Tensor& y, const DotAttrs& d) {
        return dot_general(x, y, {d.lhs_batch, d.rhs_batch, d.lhs_contract, d.rhs_contract});
    };
    Tensor ab = dot(a, b, batched); // a GEMM
    Tensor l = cholesky(s);         // the host
    Function f =
        function({a, b, s, c, r},
                 {ab, reshape(ab, {6, 5}), l, dot(l, c, plain), // a GEMM reading a host result
                  dot(c, r, split)},                            // dims no GEMM fits: the host
                 {}, test::on("cuda"));
    EXPECT_EQ(f.stats().kernels, 0u) << f.dump();

    const Shape as{2, 3, 4}, bs{2, 4, 5}, cs{3, 4}, rs{5, 4, 6};
    auto fill = [](const Shape& sh, int mul, int mod) {
        std::vector<double> v(size_t(numel(sh)));
        for (size_t i = 0; i < v.size(); ++i)
            v[i] = double(int64_t(i * size_t(mul) % size_t(mod)) - mod / 2);
        return v;
    };
    const auto av = fill(as, 7, 11), bv = fill(bs, 5, 13), cv = fill(cs, 3, 7),
               rv = fill(rs, 11, 9);
    // s = L0 L0^T with L0 lower triangular, positive diagonal: its Cholesky factor is L0, and
    // every step of the factorisation is exact (perfect squares, exact quotients)
    const std::vector<double> l0 = {2, 0, 0, 1, 3, 0, -1, 2, 1};
    std::vector<double> sv(9, 0);
    for (int i = 0; i < 3; ++i)
        for (int j = 0; j < 3; ++j)
            for (int k = 0; k < 3; ++k)
                sv[size_t(3 * i + j)] += l0[size_t(3 * i + k)] * l0[size_t(3 * j + k)];

    std::vector<Array> out =
        f(Array(av, as), Array(bv, bs), Array(sv, {3, 3}), Array(cv, cs), Array(rv, rs));
    ASSERT_EQ(out.size(), 5u);
    Shape os;
    const auto want_ab = naive_dot(av, as, bv, bs, batched, &os);
    EXPECT_EQ(out[0].shape(), os);
    EXPECT_EQ(values(out[0]), want_ab);
    EXPECT_EQ(out[1].shape(), (Shape{6, 5}));
    EXPECT_EQ(values(out[1]), want_ab);
    EXPECT_EQ(values(out[2]), l0);
    EXPECT_EQ(values(out[3]), naive_dot(l0, {3, 3}, cv, cs, plain, &os));
    const auto want_split = naive_dot(cv, cs, rv, rs, split, &os);
    EXPECT_EQ(out[4].shape(), os);
    EXPECT_EQ(values(out[4]), want_split);
    EXPECT_EQ(dev->gemms, 2); // the batched product and L c; the split one ran on the host
    // every buffer went back: the slots after their last reader, the rest at the call's end
    EXPECT_EQ(dev->live(), 0u);

    // a call that fails on the device returns its buffers too, and the next call works
    dev->fail_gemm = true;
    std::string m = test::message_of<Error>([&] {
        f(Array(av, as), Array(bv, bs), Array(sv, {3, 3}), Array(cv, cs), Array(rv, rs));
    });
    EXPECT_CONTAINS(m, "injected GEMM failure");
    EXPECT_EQ(dev->live(), 0u);
    dev->fail_gemm = false;
    out = f(Array(av, as), Array(bv, bs), Array(sv, {3, 3}), Array(cv, cs), Array(rv, rs));
    EXPECT_EQ(values(out[0]), want_ab);
}

TEST(CudaRuntimeRunner, AKernelGetsItsBufferTableAndParamsInOneArgumentBlock) {
    auto dev = std::make_shared<HostDevice>();
    test::UseDevice use(dev);
    ASSERT_TRUE(use.ok());
    // in place of the kernel y = 3 x + x^2 on 5 points: what its arguments say, checked and done
    dev->on_launch = [](const GpuKernel& k, int64_t grid, int block, DevicePtr bufs,
                        DevicePtr params) {
        const size_t operands = k.spec.load_dtypes.size() + k.spec.outputs.size();
        ASSERT_EQ(k.spec.rank, 1);
        ASSERT_EQ(operands, 2u) << k.spec.str();               // x, then y
        EXPECT_EQ(params, bufs + operands * sizeof(uint64_t)); // the params after the table
        EXPECT_GE(grid * block, 1);
        const auto* table = reinterpret_cast<const uint64_t*>(bufs);
        const auto* p = reinterpret_cast<const int64_t*>(params);
        // sizes[rank], then per operand strides[rank] and an offset (KernelSpec)
        ASSERT_EQ((std::vector<int64_t>(p, p + 5)), (std::vector<int64_t>{5, 1, 0, 1, 0}));
        const auto* x = reinterpret_cast<const double*>(table[0]);
        auto* y = reinterpret_cast<double*>(table[1]);
        for (int64_t i = 0; i < p[0]; ++i)
            y[i] = 3 * x[i] + x[i] * x[i];
    };
    Placeholder x({5}, f64, "x");
    Function f = function({x}, {3.0 * x + x * x}, {}, test::on("cuda"));
    ASSERT_EQ(f.stats().kernels, 1u) << f.dump();
    const std::vector<Array> out = f(Array(std::vector<double>{-2, -1, 0, 1, 2}));
    EXPECT_EQ(values(out[0]), (std::vector<double>{-2, -2, 0, 4, 10}));
    EXPECT_EQ(dev->launches, 1);
    f(Array(std::vector<double>{0, 0, 0, 0, 0}));
    EXPECT_EQ(dev->loads, 1); // loaded once for these shapes
    EXPECT_EQ(dev->live(), 0u);
}

TEST(CudaRuntimeRunner, AReductionOverNothingIsItsIdentityWithoutALaunch) {
    auto dev = std::make_shared<HostDevice>();
    test::UseDevice use(dev);
    ASSERT_TRUE(use.ok());
    dev->on_launch = [](const GpuKernel&, int64_t, int, DevicePtr, DevicePtr) {
        ADD_FAILURE() << "a kernel of no points was launched";
    };
    Placeholder x({-1, 3}, f32, "x");
    Function f = function({x}, {sum(x, {0}), prod(x, {0})}, {}, test::on("cuda"));
    const std::vector<Array> out = f(Array(DType::F32, {0, 3}));
    EXPECT_EQ(values(out[0]), (std::vector<double>{0, 0, 0}));
    EXPECT_EQ(values(out[1]), (std::vector<double>{1, 1, 1}));
    EXPECT_EQ(dev->launches, 0);
}

TEST(CudaRuntimeRunner, LoopsRunOnTheHostWithTheirBodiesOnTheDevice) {
    auto dev = std::make_shared<HostDevice>();
    test::UseDevice use(dev);
    ASSERT_TRUE(use.ok());
    Placeholder h0({2, 2}, f64, "h0"), w({2, 2}, f64, "w");
    ScanOptions o;
    o.length = 3;
    ScanResult r = scan(
        [](const Tensors& carry, const Tensors& args) -> std::pair<Tensors, Tensors> {
            Tensor next = matmul(carry[0], args[0]);
            return {{next}, {next}};
        },
        {h0}, {}, {w}, o);
    Function f = function({h0, w}, {r.carry[0], r.outputs[0]}, {}, test::on("cuda"));
    // h_t = h0 W^t, by hand: W = [[0, 1], [1, 1]] steps a row (a, b) to (b, a + b)
    const std::vector<Array> out = f(Array(std::vector<double>{1, 2, 3, 4}, {2, 2}),
                                     Array(std::vector<double>{0, 1, 1, 1}, {2, 2}));
    EXPECT_EQ(values(out[0]), (std::vector<double>{5, 8, 11, 18}));
    EXPECT_EQ(out[1].shape(), (Shape{3, 2, 2}));
    EXPECT_EQ(values(out[1]), (std::vector<double>{2, 3, 4, 7, 3, 5, 7, 11, 5, 8, 11, 18}));
    EXPECT_EQ(dev->gemms, 3); // one per iteration, on the device
    EXPECT_EQ(dev->live(), 0u);
}

TEST(CudaRuntimeRunner, TheNanGuardNamesTheNodeComputedOnTheDevice) {
    auto dev = std::make_shared<HostDevice>();
    test::UseDevice use(dev);
    ASSERT_TRUE(use.ok());
    Placeholder a({2, 2}, f64, "a"), b({2, 2}, f64, "b");
    FunctionOptions o = test::on("cuda");
    o.nan_guard = true;
    Function f = function({a, b}, {matmul(a, b)}, {}, o);
    const double nan = std::numeric_limits<double>::quiet_NaN();
    const std::string m = test::message_of<Error>([&] {
        f(Array(std::vector<double>{1, nan, 0, 1}, {2, 2}),
          Array(std::vector<double>{1, 0, 0, 1}, {2, 2}));
    });
    EXPECT_CONTAINS(m, "NaN guard");
    EXPECT_CONTAINS(m, "dot_general");
    EXPECT_EQ(dev->live(), 0u);
}

TEST(CudaRuntimeRunner, VariablesStayOnTheDeviceBetweenCalls) {
    auto dev = std::make_shared<test::CountingEmulator>();
    test::UseDevice use(dev);
    ASSERT_TRUE(use.ok());
    const int64_t n = 1 << 16; // 256 KB of f32
    Variable w(Array::full(f32, {n}, 1.0), "w_resident");
    Placeholder lr({}, f32, "lr");
    Tensor loss = sum(w * w);
    Function step =
        function({lr}, {loss}, {{w, w - lr * gradients(loss, {w})[0]}}, test::on("cuda"));
    // w <- w - lr * 2 w = (1 - 2 lr) w: with lr = 0.25, w halves each step
    std::vector<int64_t> bytes;
    for (int k = 0; k < 3; ++k) {
        const int64_t before = dev->uploaded;
        double got = step(Array::scalar<float>(0.25f))[0].item<double>();
        bytes.push_back(dev->uploaded - before);
        EXPECT_DOUBLE_EQ(got, double(n) * std::pow(0.25, k)) << "loss before step " << k;
    }
    EXPECT_GE(bytes[0], n * 4) << "the first call uploads w";
    EXPECT_LT(bytes[1], n * 4) << "w's device copy is current: not uploaded again";
    EXPECT_LT(bytes[2], n * 4);
    EXPECT_EQ(w.value().at(7), 0.125);
    // a new value from the host replaces the buffer: uploaded on the next call, and used
    w.assign(Array::full(f32, {n}, 2.0));
    const int64_t before = dev->uploaded;
    EXPECT_DOUBLE_EQ(step(Array::scalar<float>(0.25f))[0].item<double>(), 4.0 * double(n));
    EXPECT_GE(dev->uploaded - before, n * 4);
    EXPECT_EQ(w.value().at(0), 1.0);
}

// Note [Emulator guards]: a new buffer holds 0xff bytes, not zeros (a GPU's cached block holds
// its last owner's data), and a write past either end of a buffer makes synchronize() throw.
TEST(CudaRuntimeEmulator, FreshBuffersAreNotZeroAndStrayWritesAreReported) {
    auto dev = cuda::make_emulator();
    cuda::DevicePtr p = dev->alloc(10);
    unsigned char got[10];
    dev->download(got, p, sizeof got);
    for (unsigned char c : got)
        EXPECT_EQ(c, 0xff);
    const unsigned char one = 1;
    dev->upload(p + 9, &one, 1); // the last byte: fine
    EXPECT_NO_THROW(dev->synchronize());
    dev->free(p);
    p = dev->alloc(10); // (a call's writes all go to buffers made since the last synchronize)
    dev->upload(p + 12, &one, 1); // inside the 256-byte rounding, but past the 10 bytes
    std::string m = test::message_of<InternalError>([&] { dev->synchronize(); });
    EXPECT_CONTAINS(m, "past the end of a device buffer of 10 bytes (at byte 12)");
    dev->free(p);
    EXPECT_NO_THROW(dev->synchronize()); // reported once
    p = dev->alloc(64);
    dev->upload(p - 3, &one, 1);
    dev->free(p); // found when freed, reported at the next synchronize
    m = test::message_of<InternalError>([&] { dev->synchronize(); });
    EXPECT_CONTAINS(m, "before the start of a device buffer of 64 bytes (3 bytes before it)");
}
