// Out of memory is an sj::OutOfMemoryError that names the byte count and what was being
// allocated (src/core/Array.cpp's storage, the cpu executor's buffers), never a bare
// std::bad_alloc. The requests are 2^45 bytes (32 TiB): refused at once, nothing is touched.
#include "TestUtil.h"

#include <gtest/gtest.h>
#include <symjax/symjax.h>

#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

using namespace sj;
using sj::test::message_of;

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SJ_ALLOC_ASAN 1
#endif
#if __has_feature(thread_sanitizer)
#define SJ_ALLOC_SANITIZED 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define SJ_ALLOC_ASAN 1
#endif
#if defined(SJ_ALLOC_ASAN) || defined(__SANITIZE_THREAD__)
#define SJ_ALLOC_SANITIZED 1
#endif

#ifdef SJ_ALLOC_ASAN
// ASan aborts on a request it cannot serve (over its 1 TiB maximum) unless told to return null
// as malloc does; symjax's own checks are what these tests are about.
extern "C" const char* __asan_default_options() { return "allocator_may_return_null=1"; }
#endif

namespace {

/// Bounds the address space to what the process maps now plus 2 GiB, so that a 32 TiB request
/// fails even where the kernel would overcommit (vm.overcommit_memory=1); restores the limit at
/// scope exit. Sanitizers reserve terabytes of shadow memory: there the limit is not set (ASan
/// refuses the request itself).
class AddressSpaceLimit {
public:
    AddressSpaceLimit() {
#ifndef SJ_ALLOC_SANITIZED
        ::getrlimit(RLIMIT_AS, &old_);
        long pages = 0;
        std::ifstream("/proc/self/statm") >> pages;
        rlim_t now = rlim_t(pages) * rlim_t(::sysconf(_SC_PAGESIZE));
        struct rlimit lim = old_;
        lim.rlim_cur = std::min<rlim_t>(old_.rlim_cur, now + (rlim_t(2) << 30));
        set_ = ::setrlimit(RLIMIT_AS, &lim) == 0;
#endif
    }
    ~AddressSpaceLimit() {
        if (set_) ::setrlimit(RLIMIT_AS, &old_);
    }

private:
    struct rlimit old_ = {};
    bool set_ = false;
};

} // namespace

TEST(Allocation, HugeArrayIsAnOutOfMemoryErrorNamingIt) {
    AddressSpaceLimit limit;
    const int64_t n = int64_t(1) << 43; // f32: 2^45 bytes
    std::string msg = message_of<OutOfMemoryError>([&] { Array a(f32, {n}); });
    EXPECT_CONTAINS(msg, "out of memory allocating 32.0 TiB");
    EXPECT_CONTAINS(msg, "35184372088832 bytes");
    EXPECT_CONTAINS(msg, "array f32[8796093022208]");
    msg = message_of<OutOfMemoryError>(
        [&] { Array::uninitialized(f64, {int64_t(1) << 20, int64_t(1) << 22}); });
    EXPECT_CONTAINS(msg, "32.0 TiB");
    EXPECT_CONTAINS(msg, "array f64[1048576, 4194304]");
    // an sj::Error like every other failure of the library
    EXPECT_THROW(Array(u8, {int64_t(1) << 45}), sj::Error);
    // and the process goes on: a normal array right after
    Array ok(f32, {1000});
    EXPECT_EQ(ok.size(), 1000);
}

// A compiled function whose output needs 32 TiB (a broadcast of a 4-element input): the error
// names the value of the user's graph as well as the bytes.
TEST(Allocation, HugeBufferOfACompiledFunctionNamesTheValue) {
    Placeholder x({4}, f32, "x");
    Tensor y = broadcast_to(x, {int64_t(1) << 41, 4}) * 2.0;
    FunctionOptions o;
    o.backend = "cpu";
    Function f = function({x}, {y}, {}, o);
    AddressSpaceLimit limit;
    std::string msg =
        message_of<OutOfMemoryError>([&] { f(Array(std::vector<float>{1, 2, 3, 4})); });
    EXPECT_CONTAINS(msg, "cpu backend: the value of ");
    EXPECT_CONTAINS(msg, "x");
    EXPECT_CONTAINS(msg, "32.0 TiB");
    EXPECT_CONTAINS(msg, "f32[2199023255552, 4]");
}
