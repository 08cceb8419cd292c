// The cpu backend's disk kernel cache (src/backend/cpu/Jit.cpp): entries written on a cold
// compile and loaded by another process, corrupt entries detected and replaced, concurrent
// processes sharing one cache directory.
//
// Loading from disk needs a process whose in-memory cache is empty, so these tests run the test
// binary itself as child processes (the test KernelCacheChild.Run, selected
// with --gtest_filter) with SJ_CACHE_DIR pointing at a fresh temporary directory. Each child
// compiles the same two-kernel function, checks its results against the reference backend and
// writes the counters of sj::cpu::kernel_cache_stats() to the file named by SJ_KC_OUT.
#include <gtest/gtest.h>
#include <symjax/symjax.h>

#include "TestUtil.h"
#include "backend/cpu/Jit.h"
#include "backend/llvm/KernelCache.h"

#include <atomic>
#include <chrono>
#include <cctype>
#include <cmath>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <functional>
#include <map>
#include <random>
#include <spawn.h>
#include <sstream>
#include <string>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <thread>
#include <unistd.h>
#include <vector>

extern char** environ;

// Sanitizers reserve terabytes of address space: RLIMIT_AS cannot bound their processes.
#if defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define SJ_KC_HAS_SANITIZER 1
#endif
#endif
#ifndef SJ_KC_HAS_SANITIZER
#define SJ_KC_HAS_SANITIZER 0
#endif

using namespace sj;
namespace fs = std::filesystem;

namespace {

/// The function every child compiles: a reduction kernel over [8, 37] and an elementwise kernel
/// over [5, 3] (different iteration spaces: two kernels, two cache entries).
struct TwoKernels {
    Placeholder x{{8, 37}, f32, "x"};
    Placeholder w{{5, 3}, f32, "w"};
    std::vector<Tensor> outs{sum(tanh(x * 1.5 + 0.25) * exp(-x), {1}), erf(w) * 3.0 - log1p(w * w)};
    std::vector<Array> args() const {
        std::mt19937 g(7);
        std::uniform_real_distribution<float> u(-2, 2);
        std::vector<float> xv(8 * 37), wv(15);
        for (auto& v : xv) v = u(g);
        for (auto& v : wv) v = u(g);
        return {Array(xv, {8, 37}), Array(wv, {5, 3})};
    }
};
constexpr int kKernels = 2;
/// A function's kernels compiled together share one disk entry (one object to load).
constexpr int kEntries = 1;

struct ChildResult {
    int status = -1; // exit status (0: the child's test passed)
    std::map<std::string, int64_t> counters;
    std::string log;
};

std::string slurp(const fs::path& p) {
    std::ifstream f(p, std::ios::binary);
    return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

void spit(const fs::path& p, const std::string& s) { std::ofstream(p, std::ios::binary | std::ios::trunc) << s; }

/// Starts the test binary as a child running KernelCacheChild.Run with the cache in
/// `cache`; its counters go to `out`, its output to `out`.log.
/// `max_file_bytes` > 0 limits the size of every file the child writes (RLIMIT_FSIZE).
/// `extra_env` adds NAME=value entries (SJ_DEBUG=1 for a log of the cache's decisions).
pid_t spawn_child(const fs::path& cache, const fs::path& out, int64_t max_file_bytes = 0,
                  const std::vector<std::string>& extra_env = {}) {
    std::vector<std::string> env_s;
    for (char** e = environ; *e; ++e) {
        std::string s = *e;
        if (s.rfind("SJ_CACHE_DIR=", 0) && s.rfind("SJ_KC_", 0) && s.rfind("SJ_NUM_THREADS=", 0) &&
            s.rfind("GTEST_", 0))
            env_s.push_back(s);
    }
    env_s.push_back("SJ_CACHE_DIR=" + cache.string());
    env_s.push_back("SJ_KC_OUT=" + out.string());
    env_s.push_back("SJ_NUM_THREADS=1");
    if (max_file_bytes > 0) env_s.push_back("SJ_KC_FSIZE=" + std::to_string(max_file_bytes));
    env_s.insert(env_s.end(), extra_env.begin(), extra_env.end());
    std::vector<std::string> arg_s = {"/proc/self/exe", "--gtest_filter=KernelCacheChild.Run"};
    std::vector<char*> argv, envp;
    for (auto& a : arg_s) argv.push_back(a.data());
    argv.push_back(nullptr);
    for (auto& e : env_s) envp.push_back(e.data());
    envp.push_back(nullptr);
    posix_spawn_file_actions_t fa;
    posix_spawn_file_actions_init(&fa);
    std::string log = out.string() + ".log";
    posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    posix_spawn_file_actions_adddup2(&fa, 1, 2);
    pid_t pid = -1;
    int rc = posix_spawn(&pid, "/proc/self/exe", &fa, nullptr, argv.data(), envp.data());
    posix_spawn_file_actions_destroy(&fa);
    return rc == 0 ? pid : -1;
}

/// A child that has not finished after this long hangs (it is killed and reported).
constexpr auto kChildTimeout = std::chrono::seconds(300);

ChildResult wait_child(pid_t pid, const fs::path& out) {
    ChildResult r;
    int st = 0;
    bool timed_out = false;
    const auto deadline = std::chrono::steady_clock::now() + kChildTimeout;
    while (pid > 0) {
        pid_t w = ::waitpid(pid, &st, WNOHANG);
        if (w == pid && WIFEXITED(st)) r.status = WEXITSTATUS(st);
        if (w != 0) break;
        if (std::chrono::steady_clock::now() > deadline) {
            ::kill(pid, SIGKILL);
            ::waitpid(pid, &st, 0);
            timed_out = true;
            break;
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    std::istringstream in(slurp(out));
    std::string k;
    int64_t v;
    while (in >> k >> v) r.counters[k] = v;
    r.log = slurp(out.string() + ".log");
    if (pid <= 0) r.log += "\n[the child could not be started]";
    if (timed_out) r.log += "\n[killed: still running after " +
                            std::to_string(kChildTimeout.count()) + " s]";
    return r;
}

ChildResult run_child(const fs::path& cache, const fs::path& out) { return wait_child(spawn_child(cache, out), out); }

/// The cache entries (*.sjk) of a directory, by file name.
std::map<std::string, std::string> entries(const fs::path& dir) {
    std::map<std::string, std::string> m;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().extension() == ".sjk") m[e.path().filename().string()] = slurp(e.path());
    return m;
}

/// Everything in a directory that is not a cache entry (temporaries left behind, ...).
std::vector<std::string> strays(const fs::path& dir) {
    std::vector<std::string> v;
    for (const auto& e : fs::directory_iterator(dir))
        if (e.path().extension() != ".sjk") v.push_back(e.path().filename().string());
    return v;
}

class KernelCache : public ::testing::Test {
protected:
    void SetUp() override {
        std::string tmpl = (fs::temp_directory_path() / "sj_kcache_XXXXXX").string();
        ASSERT_NE(::mkdtemp(tmpl.data()), nullptr);
        root_ = tmpl;
        cache_ = root_ / "cache";
        fs::create_directories(root_ / "out");
    }
    void TearDown() override {
        std::error_code ec;
        fs::remove_all(root_, ec);
    }
    /// Runs one child and checks that it passed; `what` names the run in messages.
    ChildResult child(const std::string& what, const std::vector<std::string>& extra_env = {}) {
        std::string file = what + std::to_string(n_++);
        for (char& c : file)
            if (!std::isalnum(static_cast<unsigned char>(c))) c = '_'; // "symlink to /dev/zero"
        fs::path out = root_ / "out" / file;
        ChildResult r = wait_child(spawn_child(cache_, out, 0, extra_env), out);
        EXPECT_EQ(r.status, 0) << what << ": the child failed:\n" << r.log;
        EXPECT_EQ(r.counters["ok"], 1) << what << ":\n" << r.log;
        return r;
    }
    fs::path root_, cache_;
    int n_ = 0;
};

/// Offset of the object code in an entry: magic(8) schema(4) klen(8) key olen(8) sum(8).
size_t object_offset(const std::string& e) {
    uint64_t klen;
    std::memcpy(&klen, e.data() + 12, 8);
    return 20 + klen + 16;
}

} // namespace

// The child process body. The tests below run it in child processes (through --gtest_filter)
// with SJ_KC_OUT set, where it also reports its cache counters; run directly it checks the
// two-kernel program against the reference backend with whatever cache the user has.
TEST(KernelCacheChild, Run) {
    const char* out = std::getenv("SJ_KC_OUT");
    if (const char* fsize = std::getenv("SJ_KC_FSIZE")) { // a full disk, as far as writes go
        std::signal(SIGXFSZ, SIG_IGN);                    // writes past the limit fail (EFBIG)
        rlim_t n = std::strtoull(fsize, nullptr, 10);
        struct rlimit lim = {n, n};
        ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &lim), 0);
    }
    if (const char* vm = std::getenv("SJ_KC_MAX_VM")) { // bounds an endless read (not with ASan)
#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__) && !SJ_KC_HAS_SANITIZER
        rlim_t n = std::strtoull(vm, nullptr, 10);
        struct rlimit lim = {n, n};
        ASSERT_EQ(::setrlimit(RLIMIT_AS, &lim), 0);
#endif
    }
    TwoKernels k;
    FunctionOptions cpu, ref;
    cpu.backend = "cpu";
    ref.backend = "reference";
    Function f = function({k.x, k.w}, k.outs, {}, cpu);
    Function g = function({k.x, k.w}, k.outs, {}, ref);
    auto args = k.args();
    auto a = f(args[0], args[1]);
    auto b = g(args[0], args[1]);
    EXPECT_EQ(f.stats().kernels, size_t(kKernels));
    bool ok = f.stats().kernels == size_t(kKernels);
    for (size_t i = 0; i < a.size(); ++i)
        for (int64_t j = 0; j < a[i].size(); ++j) {
            // f32 polynomials vs the reference's correctly rounded values: a few ulp, summed over
            // 37 terms of magnitude <= e^2 (tolerance far below any wrong-kernel error)
            double d = std::fabs(a[i].at(j) - b[i].at(j));
            bool close = d <= 1e-5 * (1 + std::fabs(b[i].at(j)));
            EXPECT_TRUE(close) << "output " << i << "[" << j << "]: " << a[i].at(j) << " vs " << b[i].at(j);
            ok = ok && close;
        }
    if (!out) return;
    auto s = cpu::kernel_cache_stats();
    std::ofstream o(out);
    o << "ok " << int(ok) << "\ncompiles " << s.compiles << "\ndisk_hits " << s.disk_hits << "\ndisk_rejects "
      << s.disk_rejects << "\ndisk_writes " << s.disk_writes << "\n";
}

TEST_F(KernelCache, ColdCompileWritesEntriesAnotherProcessLoadsThem) {
    ChildResult cold = child("cold");
    EXPECT_EQ(cold.counters["compiles"], kKernels);
    EXPECT_EQ(cold.counters["disk_hits"], 0);
    EXPECT_EQ(cold.counters["disk_writes"], kEntries);
    EXPECT_EQ(entries(cache_).size(), size_t(kEntries));
    EXPECT_TRUE(strays(cache_).empty()) << strays(cache_)[0];

    ChildResult warm = child("warm");
    EXPECT_EQ(warm.counters["compiles"], 0) << "a second process recompiled instead of loading";
    EXPECT_EQ(warm.counters["disk_hits"], kKernels);
    EXPECT_EQ(warm.counters["disk_rejects"], 0);
    EXPECT_EQ(warm.counters["disk_writes"], 0);
}

TEST_F(KernelCache, CorruptEntriesAreDetectedRebuiltAndReplaced) {
    child("populate");
    const auto good = entries(cache_);
    ASSERT_EQ(good.size(), size_t(kEntries));
    std::vector<std::string> names;
    for (const auto& [n, e] : good) names.push_back(n);

    auto flip = [](std::string e, size_t at) {
        e[at] = char(e[at] ^ 0x10);
        return e;
    };
    struct Kind {
        const char* name;
        std::function<std::string(const std::string&)> make;
    };
    std::mt19937 g(3);
    std::vector<Kind> kinds = {
        {"truncated", [](const std::string& e) { return e.substr(0, e.size() / 2); }},
        {"empty", [](const std::string&) { return std::string(); }},
        {"object bit flip", [&](const std::string& e) { return flip(e, (object_offset(e) + e.size()) / 2); }},
        {"checksum bit flip", [&](const std::string& e) { return flip(e, object_offset(e) - 3); }},
        {"key bit flip", [&](const std::string& e) { return flip(e, 20 + 5); }},
        {"magic bit flip", [&](const std::string& e) { return flip(e, 1); }},
        {"garbage", [&](const std::string& e) {
             std::string s(e.size(), '\0');
             for (auto& ch : s) ch = char(g());
             return s;
         }},
        {"trailing bytes", [](const std::string& e) { return e + "junk"; }},
    };
    // one kind of damage per child run; "key bit flip" is a well-formed entry of another key
    for (const Kind& kind : kinds) {
        spit(cache_ / names[0], kind.make(good.at(names[0])));
        const std::string what = kind.name;
        ChildResult r = child("corrupt");
        EXPECT_EQ(r.counters["disk_rejects"], kEntries) << what << " not detected";
        EXPECT_EQ(r.counters["disk_hits"], 0) << what;
        EXPECT_EQ(r.counters["compiles"], kKernels) << what;
        EXPECT_EQ(r.counters["disk_writes"], kEntries) << what;
        // the rebuilt entry replaces the bad one: byte for byte the entry of the first run
        // (code generation is deterministic)
        auto now = entries(cache_);
        EXPECT_EQ(now.size(), size_t(kEntries)) << what;
        for (const auto& n : names) EXPECT_TRUE(now[n] == good.at(n)) << what << ": " << n << " not rebuilt";
        EXPECT_TRUE(strays(cache_).empty()) << what;
    }
    ChildResult warm = child("after");
    EXPECT_EQ(warm.counters["disk_hits"], kKernels);
    EXPECT_EQ(warm.counters["disk_rejects"], 0);
}

TEST_F(KernelCache, ConcurrentProcessesShareOneEmptyDirectory) {
    constexpr int kChildren = 6;
    std::vector<pid_t> pids;
    std::vector<fs::path> outs;
    for (int i = 0; i < kChildren; ++i) {
        outs.push_back(root_ / "out" / ("racer" + std::to_string(i)));
        pids.push_back(spawn_child(cache_, outs.back()));
        ASSERT_GT(pids.back(), 0);
    }
    int64_t compiles = 0;
    for (int i = 0; i < kChildren; ++i) {
        ChildResult r = wait_child(pids[i], outs[i]);
        EXPECT_EQ(r.status, 0) << "child " << i << ":\n" << r.log;
        EXPECT_EQ(r.counters["ok"], 1) << "child " << i << ":\n" << r.log;
        EXPECT_EQ(r.counters["disk_rejects"], 0) << "child " << i << " read a partial entry";
        EXPECT_EQ(r.counters["compiles"] + r.counters["disk_hits"], kKernels);
        compiles += r.counters["compiles"];
    }
    std::printf("[ cache    ] %d concurrent children compiled %lld kernels in all\n", kChildren,
                static_cast<long long>(compiles));
    EXPECT_EQ(entries(cache_).size(), size_t(kEntries));
    auto s = strays(cache_);
    EXPECT_TRUE(s.empty()) << "left behind: " << s[0];
    ChildResult warm = child("after");
    EXPECT_EQ(warm.counters["disk_hits"], kKernels) << "the cache did not end up valid";
    EXPECT_EQ(warm.counters["disk_rejects"], 0);
}

// Entries that are not regular files: a directory (a stream read of it threw through
// std::terminate), a FIFO (opening it for reading blocks until a writer comes) and a symbolic
// link to /dev/zero (a read never ends). Each must be a miss that SJ_DEBUG=1 explains: the child
// compiles, passes, and does not hang or grow without bound.
TEST_F(KernelCache, EntriesThatAreNotRegularFilesAreLoggedMisses) {
    child("populate");
    const auto good = entries(cache_);
    ASSERT_EQ(good.size(), size_t(kEntries));
    const std::string name = good.begin()->first;
    const fs::path entry = cache_ / name;
    struct Kind {
        const char* name;
        std::function<void()> make;
        const char* reason; // in the child's log
        bool replaced;      // the rebuilt entry is renamed over it
    };
    std::vector<Kind> kinds = {
        {"directory", [&] { fs::create_directories(entry / "inside"); }, "a directory", false},
        {"fifo", [&] { ASSERT_EQ(::mkfifo(entry.c_str(), 0600), 0); }, "a FIFO", true},
        {"symlink to /dev/zero", [&] { fs::create_symlink("/dev/zero", entry); },
         "a symbolic link", true},
    };
    for (const Kind& kind : kinds) {
        const std::string what = kind.name;
        fs::remove_all(entry);
        kind.make();
        ChildResult r = child(what, {"SJ_DEBUG=1", "SJ_KC_MAX_VM=" + std::to_string(8LL << 30)});
        EXPECT_EQ(r.counters["disk_rejects"], kEntries) << what;
        EXPECT_EQ(r.counters["disk_hits"], 0) << what;
        EXPECT_EQ(r.counters["compiles"], kKernels) << what;
        EXPECT_NE(r.log.find("kernel cache: " + entry.string() + ": " + kind.reason),
                  std::string::npos)
            << what << ": no SJ_DEBUG line saying why:\n"
            << r.log;
        if (kind.replaced) {
            EXPECT_EQ(r.counters["disk_writes"], kEntries) << what;
            ASSERT_TRUE(fs::is_regular_file(fs::symlink_status(entry))) << what << ": not replaced";
            EXPECT_TRUE(slurp(entry) == good.at(name)) << what << ": not rebuilt";
        } else {
            EXPECT_EQ(r.counters["disk_writes"], 0) << what << ": renamed over a directory?";
        }
    }
    ChildResult warm = child("after"); // the last kind's entry was rebuilt: a plain hit now
    EXPECT_EQ(warm.counters["disk_hits"], kKernels);
    EXPECT_EQ(warm.counters["disk_rejects"], 0);
}

// A write that fails (disk full, quota) must leave no entry: the child may write at most 256
// bytes per file, less than any entry (the key alone is longer), so every entry write fails, and
// the cache directory must stay empty (no truncated entry renamed into place, no temporaries).
TEST_F(KernelCache, FailedWritesLeaveNoPartialEntries) {
    fs::path out = root_ / "out" / "full";
    ChildResult r = wait_child(spawn_child(cache_, out, 256), out);
    EXPECT_EQ(r.status, 0) << r.log;
    EXPECT_EQ(r.counters["ok"], 1) << r.log;
    EXPECT_EQ(r.counters["compiles"], kKernels);
    EXPECT_EQ(r.counters["disk_writes"], 0);
    std::vector<std::string> left;
    if (fs::exists(cache_))
        for (const auto& e : fs::directory_iterator(cache_)) left.push_back(e.path().filename().string());
    EXPECT_TRUE(left.empty()) << "left behind: " << left[0] << " (" << fs::file_size(cache_ / left[0]) << " bytes)";
}

// In this process: SJ_CACHE_DIR=off writes nothing, and an unusable directory is no error. (The
// constants make kernels no other test compiles, so they miss the in-memory cache.)
TEST_F(KernelCache, DisabledOrUnwritableCacheStillCompiles) {
    Placeholder x({6, 5}, f32, "x");
    auto check = [&](double c) {
        Tensor y = exp(x * c) + c;
        Array v = Array::full(f32, {6, 5}, 0.5);
        FunctionOptions o;
        o.backend = "cpu";
        auto before = cpu::kernel_cache_stats();
        Array got = function({x}, {y}, {}, o)(v)[0];
        auto after = cpu::kernel_cache_stats();
        EXPECT_EQ(after.compiles - before.compiles, 1);
        EXPECT_EQ(after.disk_writes - before.disk_writes, 0);
        for (int64_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got.at(i), std::exp(0.5 * c) + c, 1e-5 * (1 + c));
    };
    {
        sj::test::ScopedEnv e("SJ_CACHE_DIR", "off");
        EXPECT_EQ(codegen::cache_dir(), "");
        check(1.0 / 3.0 + 1e-9);
    }
    {
        spit(root_ / "a_file", "x");
        sj::test::ScopedEnv e("SJ_CACHE_DIR", (root_ / "a_file" / "cache").c_str()); // under a file
        check(2.0 / 3.0 + 1e-9);
    }
}

namespace {

/// Lines of /proc/self/maps: the process's memory mappings (-1 where there is no such file).
long memory_mappings() {
    std::ifstream f("/proc/self/maps");
    if (!f)
        return -1;
    long n = 0;
    for (std::string line; std::getline(f, line);)
        ++n;
    return n;
}

} // namespace

/// Sets how many unheld objects the process keeps for the scope (Note [Unloading kernels]).
struct RetainRecent {
    explicit RetainRecent(size_t n) { cpu::retain_recent_objects(n); }
    ~RetainRecent() { cpu::retain_recent_objects(512); }
};

// Note [Unloading kernels] (src/backend/cpu/Jit.cpp): a function's kernels stay loaded while it
// or another function uses them, go with the last one (no recent objects kept here), and load
// again for a later function; the process's memory mappings do not grow with the functions
// compiled and dropped. (The constants are compiled into the kernels: values no other test uses
// make the kernels this test's own.)
TEST(KernelUnloading, CodeGoesWithTheLastFunctionThatUsesIt) {
    RetainRecent none(0);
    Placeholder x({6, 9}, f32, "x");
    auto make = [&](double c) { return function({x}, {sum(exp(x * c), {1}) + c}); };
    Array xv = test::random_array(f32, {6, 9}, 7);
    auto check = [&](Function& f, double c, const char* what) {
        SCOPED_TRACE(what);
        std::vector<Array> want =
            function({x}, {sum(exp(x * c), {1}) + c}, {}, test::on("reference")).call({xv});
        test::expect_close(f.call({xv})[0], want[0], 1e-6, 1e-6, what);
    };
    const double c = 0.61803398;
    const auto s0 = cpu::kernel_cache_stats();
    Function f1 = make(c);
    check(f1, c, "first function");
    const auto s1 = cpu::kernel_cache_stats();
    EXPECT_EQ(s1.objects_loaded, s0.objects_loaded + 1);
    EXPECT_EQ(s1.objects_unloaded, s0.objects_unloaded);
    Function f2 = make(c); // the same kernels: found loaded
    check(f2, c, "second function");
    EXPECT_EQ(cpu::kernel_cache_stats().objects_loaded, s1.objects_loaded);
    f1 = Function();
    EXPECT_EQ(cpu::kernel_cache_stats().objects_unloaded, s0.objects_unloaded)
        << "f2 still uses the code";
    check(f2, c, "second function, the first gone");
    f2 = Function();
    const auto s2 = cpu::kernel_cache_stats();
    EXPECT_EQ(s2.objects_unloaded, s0.objects_unloaded + 1);
    Function f3 = make(c); // loaded again (from the disk cache, or compiled)
    check(f3, c, "a function made after both were gone");
    EXPECT_EQ(cpu::kernel_cache_stats().objects_loaded, s2.objects_loaded + 1);
    f3 = Function();

    // 60 functions with kernels of their own, each dropped after its call: without unloading,
    // every one left two or three mappings behind
    const long m0 = memory_mappings();
    for (int i = 0; i < 60; ++i) {
        Function g = make(1.0 + i / 1024.0 + 1e-5);
        g.call({xv});
    }
    const long m1 = memory_mappings();
    if (m0 >= 0)
        EXPECT_LT(m1 - m0, 30) << m0 << " mappings before, " << m1 << " after";
    EXPECT_EQ(cpu::kernel_cache_stats().objects_loaded - s2.objects_loaded,
              cpu::kernel_cache_stats().objects_unloaded - s2.objects_unloaded);
}

// The process keeps the objects it used last loaded after their functions went, as many as it
// is told, and unloads the older ones.
TEST(KernelUnloading, TheObjectsUsedLastStayLoaded) {
    RetainRecent four(4);
    Placeholder x({5, 3}, f32, "x");
    Array xv = test::random_array(f32, {5, 3}, 8);
    const auto s0 = cpu::kernel_cache_stats();
    auto live = [&] {
        const auto s = cpu::kernel_cache_stats();
        return (s.objects_loaded - s0.objects_loaded) - (s.objects_unloaded - s0.objects_unloaded);
    };
    for (int i = 0; i < 10; ++i) {
        Function f = function({x}, {x * (0.2718281 + i / 512.0)});
        f.call({xv});
    }
    EXPECT_EQ(cpu::kernel_cache_stats().objects_loaded - s0.objects_loaded, 10);
    EXPECT_EQ(live(), 4) << "the last four, their functions gone";
    Function again = function({x}, {x * (0.2718281 + 9 / 512.0)}); // the last one: still loaded
    test::expect_close(
        again.call({xv})[0],
        function({x}, {x * (0.2718281 + 9 / 512.0)}, {}, test::on("reference")).call({xv})[0], 1e-7,
        0, "a function made again");
    EXPECT_EQ(cpu::kernel_cache_stats().objects_loaded - s0.objects_loaded, 10);
}

// Threads that make and drop functions with the same kernels, none kept once unused: a last hold
// released in one thread while another finds the kernel gone and loads it again (the unload then
// happens on the finder's side, Note [Unloading kernels]) must neither crash nor mix up code.
TEST(KernelUnloading, ThreadsMakingAndDroppingTheSameFunctionsAgree) {
    RetainRecent none(0);
    Placeholder x({4, 7}, f32, "x");
    Array xv = test::random_array(f32, {4, 7}, 9);
    const double cs[3] = {0.1234567, 0.2345678, 0.3456789};
    std::vector<Array> want;
    for (double c : cs) want.push_back(function({x}, {exp(x) * c}, {}, test::on("reference")).call({xv})[0]);
    std::atomic<int> wrong{0}, errors{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t)
        threads.emplace_back([&, t] {
            for (int i = 0; i < 40; ++i) {
                const int k = (i + t) % 3;
                try {
                    Function f = function({x}, {exp(x) * cs[k]});
                    Array got = f.call({xv})[0];
                    for (int64_t j = 0; j < got.size(); ++j)
                        wrong += std::fabs(got.at(j) - want[size_t(k)].at(j)) > 1e-6 * (1 + std::fabs(want[size_t(k)].at(j)));
                } catch (const std::exception&) {
                    ++errors;
                }
            }
        });
    for (auto& th : threads) th.join();
    EXPECT_EQ(errors.load(), 0);
    EXPECT_EQ(wrong.load(), 0);
}
