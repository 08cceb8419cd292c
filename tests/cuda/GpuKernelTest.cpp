// The cuda backend's kernels without a GPU: launch choices, PTX that ptxas accepts for sm_80
// and sm_90, and the same kernels run by the host emulator (Note [The emulator] in
// src/backend/cuda/Emulator.cpp) against the reference backend.
#include "TestUtil.h"
#include "backend/cuda/CudaTarget.h"
#include "backend/cuda/Device.h"
#include "backend/cuda/NvptxRenderer.h"
#include "compiler/KernelPlan.h"
#include "compiler/Pipeline.h"

#include <gtest/gtest.h>
#include <symjax/ir/Node.h>
#include <symjax/symjax.h>

#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <unistd.h>

using namespace sj;
using sj::test::expect_close;
using sj::test::on;
using sj::test::random_array;

namespace {

/// H200's limits, as the plans for a GPU see them.
cuda::DeviceLimits h200() {
    return {};
}

/// The one kernel group computing `outs` (static shapes), with its launch.
struct Bound {
    compiler::Compiled compiled;
    const compiler::Group* group = nullptr;
    compiler::KernelLaunch launch;
};
Bound bind_one(const std::vector<Tensor>& outs) {
    Bound b;
    std::vector<NodePtr> roots;
    for (const auto& t : outs)
        roots.push_back(t.node());
    b.compiled = compiler::compile(roots, cuda::cuda_target());
    for (const auto& g : b.compiled.plan.groups)
        if (g.kind == compiler::Group::Kind::Kernel) {
            EXPECT_EQ(b.group, nullptr) << "more than one kernel:\n" << b.compiled.plan.str();
            b.group = &g;
        }
    if (!b.group) {
        ADD_FAILURE() << "no kernel group:\n" << b.compiled.plan.str();
        return b;
    }
    auto shape_of = [](const Node* n) -> const Shape& { return n->shape(); };
    b.launch = compiler::plan_kernel(*b.group, b.compiled.plan, shape_of,
                                     cuda::cuda_target().vector_lanes());
    return b;
}

/// Runs launch `l` of `b`'s kernel on the emulator with `args` for its placeholder loads (and
/// its scratch buffer and second launch when it is a split reduction); returns its outputs.
std::vector<Array> emulate(const Bound& b, const cuda::GpuLaunch& l,
                           const std::map<const Node*, Array>& args,
                           std::shared_ptr<cuda::Device> dev = cuda::make_emulator()) {
    std::vector<cuda::DevicePtr> bufs;
    for (const auto& site : b.group->loads) {
        auto it = args.find(site.buffer.get());
        if (it == args.end()) {
            ADD_FAILURE() << "a load that is not an argument: " << site.buffer->describe();
            return {};
        }
        const Array& a = it->second;
        bufs.push_back(dev->alloc(size_t(a.nbytes())));
        dev->upload(bufs.back(), a.raw(), size_t(a.nbytes()));
    }
    std::vector<Array> outs;
    for (size_t o = 0; o < b.launch.out_shapes.size(); ++o) {
        outs.push_back(Array::full(b.group->outputs[o].dtype, b.launch.out_shapes[o], -777));
        bufs.push_back(dev->alloc(size_t(outs.back().nbytes())));
        dev->upload(bufs.back(), outs.back().raw(), size_t(outs.back().nbytes()));
    }
    if (l.scratch_bytes > 0)
        bufs.push_back(dev->alloc(size_t(l.scratch_bytes)));
    cuda::DevicePtr table = dev->alloc(bufs.size() * 8);
    dev->upload(table, bufs.data(), bufs.size() * 8);
    cuda::DevicePtr params = dev->alloc(b.launch.params.size() * 8);
    dev->upload(params, b.launch.params.data(), b.launch.params.size() * 8);
    dev->launch(*dev->load(l.kernel), l.grid, l.block, table, params);
    if (l.kernel.phase == cuda::GpuPhase::Partials) {
        // the Combine launch reads the partials alone: inputs overwritten with 0xff bytes (NaN,
        // -1) here must not change the result (a Combine that recomputed the whole reduction,
        // one thread per kept point, once gave right values at one-thread speed)
        for (size_t i = 0; i < b.group->loads.size(); ++i) {
            const Array& a = args.at(b.group->loads[i].buffer.get());
            std::vector<unsigned char> junk(size_t(a.nbytes()), 0xff);
            dev->upload(bufs[i], junk.data(), junk.size());
        }
        dev->launch(*dev->load(l.combine), l.combine_grid, l.combine.block, table, params);
    }
    for (size_t o = 0; o < outs.size(); ++o)
        dev->download(outs[o].raw(), bufs[b.group->loads.size() + o], size_t(outs[o].nbytes()));
    for (auto p : bufs)
        dev->free(p);
    dev->free(table);
    dev->free(params);
    return outs;
}

/// For `outs` (one kernel): PTX for sm_80 and sm_90 through ptxas, and the emulator's values
/// against the reference backend's, with the launch choose_launch makes for the emulator and,
/// where the kernel reduces, with the other thread map too.
void check_kernel(const std::vector<Placeholder>& ins, const std::vector<Tensor>& outs,
                  const std::string& what, double rtol = 1e-6, double atol = 1e-6,
                  bool expect_split = false) {
    const uint64_t seed = 1;
    SCOPED_TRACE(what);
    Bound b = bind_one(outs);
    ASSERT_NE(b.group, nullptr);
    std::map<const Node*, Array> args;
    std::vector<Function::Arg> call;
    std::vector<Tensor> in_tensors;
    for (size_t i = 0; i < ins.size(); ++i) {
        Array a = random_array(ins[i].dtype(), ins[i].shape(), seed + i);
        args[ins[i].node().get()] = a;
        call.push_back(a);
        in_tensors.push_back(ins[i]);
    }
    std::vector<Array> want = function(in_tensors, outs, {}, on("reference")).call(call);
    auto dev = cuda::make_emulator();
    cuda::GpuLaunch chosen = cuda::choose_launch(b.launch, dev->info().limits);
    std::vector<cuda::GpuLaunch> launches{chosen};
    if (b.launch.spec.reduce_rank > 0) { // the other map, forced, unsplit
        cuda::GpuLaunch other;
        other.kernel.spec = b.launch.spec;
        bool to_blocks = chosen.kernel.map == cuda::ThreadMap::Points;
        other.kernel.map = to_blocks ? cuda::ThreadMap::Blocks : cuda::ThreadMap::Points;
        other.kernel.block = to_blocks ? 16 : 64;
        other.block = other.kernel.block;
        other.grid = 3;
        launches.push_back(other);
    }
    if (expect_split)
        EXPECT_EQ(chosen.kernel.phase, cuda::GpuPhase::Partials) << chosen.kernel.str();
    for (const auto& l : launches) {
        std::string map = l.kernel.map == cuda::ThreadMap::Points ? "points" : "blocks";
        std::vector<cuda::GpuKernel> codes{l.kernel};
        if (l.kernel.phase == cuda::GpuPhase::Partials) {
            codes.push_back(l.combine);
            map += " split " + std::to_string(l.kernel.chunks);
        }
        for (const auto& code : codes)
            for (int sm : {80, 90}) {
                std::string ptx = cuda::compile_ptx(code, sm);
                EXPECT_NE(ptx.find(".target sm_" + std::to_string(sm)), std::string::npos) << ptx;
                EXPECT_EQ(cuda::assemble_ptx(ptx, sm), "") << map << "\n" << ptx;
            }
        std::vector<Array> got = emulate(b, l, args);
        ASSERT_EQ(got.size(), want.size());
        for (size_t o = 0; o < got.size(); ++o) { // the group's o-th root is which output?
            const auto& roots = b.compiled.roots;
            size_t i =
                size_t(std::find(roots.begin(), roots.end(), b.group->roots[o]) - roots.begin());
            ASSERT_LT(i, want.size()) << "kernel output " << o << " is no function output";
            expect_close(got[o], want[i], rtol, atol,
                         what + " " + map + " output " + std::to_string(i));
        }
    }
}

} // namespace

TEST(GpuLaunch, ElementwiseIsOneThreadPerPoint) {
    Placeholder x({1000, 300}, f32, "x");
    Bound b = bind_one({exp(x) * 2.0 + 1.0});
    cuda::GpuLaunch l = cuda::choose_launch(b.launch, h200());
    EXPECT_EQ(l.kernel.map, cuda::ThreadMap::Points);
    EXPECT_EQ(l.block, 256);
    // 300,000 points: ceil(300000 / 256) = 1172 blocks, under the cap of 132 * 32
    EXPECT_EQ(l.grid, 1172);
    Placeholder big({1 << 26}, f32, "big");
    cuda::GpuLaunch lb = cuda::choose_launch(bind_one({big * 3.0}).launch, h200());
    EXPECT_EQ(lb.grid, 132 * 32) << "grid-stride loops: the grid is capped";
}

TEST(GpuLaunch, ContiguousReductionsAreABlockPerPoint) {
    Placeholder x({1000, 4096}, f32, "x");
    Bound b = bind_one({sum(x, {1})});
    ASSERT_EQ(b.launch.spec.row, 0) << b.launch.spec.str();
    cuda::GpuLaunch l = cuda::choose_launch(b.launch, h200());
    EXPECT_EQ(l.kernel.map, cuda::ThreadMap::Blocks);
    EXPECT_EQ(l.kernel.phase, cuda::GpuPhase::Whole) << "1000 blocks fill 132 multiprocessors";
    EXPECT_EQ(l.block, 256);
    EXPECT_EQ(l.grid, 1000);
    // a short reduction (fewer points than a warp): a thread per kept point
    Placeholder s({4096, 8}, f32, "s");
    EXPECT_EQ(cuda::choose_launch(bind_one({sum(s, {1})}).launch, h200()).kernel.map,
              cuda::ThreadMap::Points);
    // 40 reduced points: the tree is 64 wide
    Placeholder m({100, 40}, f32, "m");
    cuda::GpuLaunch lm = cuda::choose_launch(bind_one({max(m, {1})}).launch, h200());
    EXPECT_EQ(lm.kernel.map, cuda::ThreadMap::Blocks);
    EXPECT_EQ(lm.block, 64);
}

TEST(GpuLaunch, FewKeptPointsSplitTheirReductions) {
    Placeholder x({1 << 26}, f32, "x");
    cuda::GpuLaunch l = cuda::choose_launch(bind_one({sum(x)}).launch, h200());
    EXPECT_EQ(l.kernel.map, cuda::ThreadMap::Blocks);
    EXPECT_EQ(l.kernel.phase, cuda::GpuPhase::Partials);
    // 4 blocks per multiprocessor for the one kept point: 528 chunks of 2^26 / 528 points
    EXPECT_EQ(l.kernel.chunks, 132 * 4);
    EXPECT_EQ(l.grid, 132 * 4);
    EXPECT_EQ(l.scratch_bytes, 132 * 4 * 8);
    EXPECT_EQ(l.combine.phase, cuda::GpuPhase::Combine);
    EXPECT_EQ(l.combine_grid, 1);
    // 64 rows of 2^20: 9 chunks each fill 576 blocks
    Placeholder r({64, 1 << 20}, f32, "r");
    cuda::GpuLaunch lr = cuda::choose_launch(bind_one({sum(r, {1}), max(r, {1})}).launch, h200());
    EXPECT_EQ(lr.kernel.chunks, 9);
    EXPECT_EQ(lr.scratch_bytes, 64 * 9 * 2 * 8);
    // a reduction too short for two chunks of 8 points per thread stays whole
    Placeholder s({2, 3000}, f32, "s");
    EXPECT_EQ(cuda::choose_launch(bind_one({sum(s, {1})}).launch, h200()).kernel.phase,
              cuda::GpuPhase::Whole);
}

TEST(GpuLaunch, ColumnSumsAreOneThreadPerColumn) {
    Placeholder dy({512, 1000}, f32, "dy");
    Bound b = bind_one({sum(dy, {0})});
    ASSERT_GT(b.launch.spec.row, 0) << b.launch.spec.str();
    cuda::GpuLaunch l = cuda::choose_launch(b.launch, h200());
    EXPECT_EQ(l.kernel.map, cuda::ThreadMap::Points);
}

TEST(GpuKernel, ElementwiseF32) {
    Placeholder x({37, 53}, f32, "x"), y({53}, f32, "y");
    check_kernel({x, y}, {tanh(x) * y + exp(x) - log1p(abs(y))}, "f32 elementwise");
}

TEST(GpuKernel, LibdeviceFunctionsF32AndF64) {
    // no inline expansion for these: libdevice on NVPTX, libm on the emulator (a few ulp apart)
    Placeholder x({3, 41}, f32, "x"), y({3, 41}, f32, "y");
    check_kernel({x, y}, {sin(x) + cos(y) * pow(abs(x) + 0.5, y) + atan2(x, y)}, "f32 libdevice",
                 1e-5, 1e-5);
    Placeholder a({5, 17}, f64, "a");
    check_kernel({a}, {exp(a) + tanh(a) * sin(a) - log(abs(a) + 1.0)}, "f64 libdevice", 1e-12,
                 1e-12);
}

TEST(GpuKernel, IntegerAndBoolOps) {
    Placeholder i({64}, i32, "i"), j({64}, i32, "j");
    // the reference's rules where hardware traps: x / 0 = 0, x % 0 = 0 (Note [Integer
    // arithmetic wraps]); comparisons to bool and back
    Tensor ti = i, tj = j;
    Tensor q = where(ti > tj, ti / (tj - tj), ti % tj) + cast(eq(ti, tj), i32);
    check_kernel({i, j}, {q}, "i32 div/mod/where");
}

TEST(GpuKernel, RowSumsOnBothMaps) {
    Placeholder x({33, 300}, f32, "x");
    check_kernel({x}, {sum(x, {1}), max(x, {1})}, "row sum and max", 1e-6, 1e-5);
}

TEST(GpuKernel, ColumnSumsOnBothMaps) {
    Placeholder x({300, 70}, f32, "x");
    check_kernel({x}, {sum(x * x, {0})}, "column sums of squares", 1e-6, 1e-5);
}

TEST(GpuKernel, FullReductionAndSiblingOutputs) {
    Placeholder x({7, 11, 13}, f64, "x");
    check_kernel({x}, {sum(x), min(x)}, "full reduction f64", 1e-12, 1e-12);
    Placeholder y({20, 30, 40}, f32, "y");
    check_kernel({y}, {sum(exp(y), {0, 2})}, "two reduced dims", 1e-6, 1e-5);
}

TEST(GpuKernel, SplitReductions) {
    // the emulator fills 4 blocks (one multiprocessor): 1 or 3 kept points split
    Placeholder x({20011}, f32, "x");
    check_kernel({x}, {sum(x), max(x)}, "split full reduction", 1e-6, 1e-5, true);
    Placeholder y({3, 4000}, f64, "y");
    Tensor ty = y;
    check_kernel({y}, {sum(ty * ty, {1}), ty * 2.0}, "split rows with an elementwise sibling",
                 1e-12, 1e-12, true);
    // partials of 8 bytes (an f32 sum's double) before partials of 4 (an f32 max): each output's
    // partials start at its slot of 8 bytes, not at a count of its own type (FuzzFusion seed
    // 2300055 on the emulator: the max read the sum's partials, 100736 for 30)
    Placeholder z({40000}, f32, "z");
    Tensor tz = z;
    // (the group lists its outputs in the reverse of the function's order: both are checked)
    check_kernel({z}, {max(tz * tz * tz + tz), tz * 0.5, sum(exp(tz))},
                 "split sum and max of f32, the sum first in the group", 1e-6, 1e-5, true);
    check_kernel({z}, {sum(exp(tz)), tz * 0.5, max(tz * tz * tz + tz)},
                 "split sum and max of f32, the max first in the group", 1e-6, 1e-5, true);
}

// The emulator unloads a kernel's code with its last user (here it keeps no recent ones), as
// the cpu backend does (Note [Unloading kernels] in src/backend/cpu/Jit.cpp), and loads it again
// under a new symbol when asked: the symbols were numbered by the count of kernels held, and a
// name reused after a failed load gave "Duplicate definition" to every later kernel.
TEST(GpuKernel, EmulatorKernelsLoadAgainAfterTheirLastUserWent) {
    Placeholder x({1000}, f32, "x");
    Tensor tx = x;
    Bound b = bind_one({exp(tx) * 3.0});
    ASSERT_NE(b.group, nullptr);
    Array xv = random_array(f32, {1000}, 3);
    std::map<const Node*, Array> args{{x.node().get(), xv}};
    Array want = function({x}, {exp(tx) * 3.0}, {}, on("reference")).call({xv})[0];
    setenv("SJ_EMU_KEEP_KERNELS", "0", 1);
    auto dev = cuda::make_emulator();
    unsetenv("SJ_EMU_KEEP_KERNELS");
    cuda::GpuLaunch l = cuda::choose_launch(b.launch, dev->info().limits);
    for (int round = 0; round < 3; ++round) {
        auto k = dev->load(l.kernel);
        EXPECT_EQ(dev->load(l.kernel), k) << "a loaded kernel is shared";
        k.reset();                                         // its last user: unloaded
        std::vector<Array> got = emulate(b, l, args, dev); // loads it again
        ASSERT_EQ(got.size(), 1u);
        expect_close(got[0], want, 1e-6, 1e-6, "round " + std::to_string(round));
    }
}

TEST(GpuKernel, PtxasRejectsWhatIsNotPtx) {
    // the check the tests above rely on has teeth: a module with a bad instruction fails
    std::string bad =
        ".version 7.8\n.target sm_90\n.address_size 64\n.visible .entry k() { frobnicate; }\n";
    std::string err = cuda::assemble_ptx(bad, 90);
    EXPECT_NE(err.find("rejects the PTX"), std::string::npos) << err;
}

TEST(GpuKernel, PtxIsAssembledInProcessAndAgreesWithAPtxasProcess) {
    // Note [Assembling PTX in process]: where the toolkit has nvJitLink (found at build time),
    // assemble_ptx runs it inside the process; it accepts a kernel's PTX for sm_80 and sm_90 as a
    // ptxas process does, and rejects a bad instruction and PTX for a newer target than the
    // architecture, as the process does, saying why
#ifdef SJ_NVJITLINK
    EXPECT_TRUE(cuda::assembles_in_process()) << "nvJitLink was found at build time: " SJ_NVJITLINK;
#endif
    Placeholder x({4, 300}, f32, "x");
    Bound b = bind_one({sum(exp(x), {1})});
    cuda::GpuLaunch l = cuda::choose_launch(b.launch, h200());
    const std::string bad =
        ".version 7.8\n.target sm_90\n.address_size 64\n.visible .entry k() { frobnicate; }\n";
    struct Verdicts {
        std::string ok80, ok90, bad, too_new;
    };
    auto verdicts = [&] {
        Verdicts v;
        v.ok80 = cuda::assemble_ptx(cuda::compile_ptx(l.kernel, 80), 80);
        v.ok90 = cuda::assemble_ptx(cuda::compile_ptx(l.kernel, 90), 90);
        v.bad = cuda::assemble_ptx(bad, 90);
        v.too_new = cuda::assemble_ptx(cuda::compile_ptx(l.kernel, 90), 80); // .target sm_90
        return v;
    };
    auto expect_sound = [](const Verdicts& v, const char* how) {
        EXPECT_EQ(v.ok80, "") << how;
        EXPECT_EQ(v.ok90, "") << how;
        EXPECT_NE(v.bad.find("rejects the PTX"), std::string::npos) << how << ": " << v.bad;
        EXPECT_NE(v.too_new.find("rejects the PTX"), std::string::npos) << how << ": " << v.too_new;
    };
    const bool in_process = cuda::assembles_in_process();
    const Verdicts in = verdicts();
    expect_sound(in, in_process ? "nvJitLink" : "ptxas");
    if (in_process)
        EXPECT_NE(in.bad.find("nvJitLink"), std::string::npos) << in.bad;
#ifdef SJ_TEST_PTXAS
    { // the same through a ptxas process, whatever was found
        sj::test::ScopedEnv ptxas("SJ_PTXAS", SJ_TEST_PTXAS);
        EXPECT_FALSE(cuda::assembles_in_process());
        expect_sound(verdicts(), "a ptxas process");
    }
#endif
    EXPECT_EQ(cuda::assembles_in_process(), in_process) << "SJ_PTXAS restored";
}

TEST(GpuKernel, PtxComesFromTheDiskCacheKeyedByArchitecture) {
    // Note [PTX cache]: the first load compiles and writes an entry per architecture, the second
    // reads it back (the same PTX, no compile), a damaged entry is a counted miss and is
    // rewritten, and SJ_CACHE_DIR=off keeps nothing
    Placeholder x({4, 300}, f32, "x");
    Bound b = bind_one({sum(exp(x), {1})});
    cuda::GpuLaunch l = cuda::choose_launch(b.launch, h200());
    const std::filesystem::path dir =
        std::filesystem::temp_directory_path() / ("sj_ptx_cache_" + std::to_string(getpid()));
    std::filesystem::remove_all(dir);
    sj::test::ScopedEnv cache_dir("SJ_CACHE_DIR", dir.c_str()); // (restored however the test ends)
    auto entries = [&] {
        std::vector<std::filesystem::path> e;
        if (std::filesystem::exists(dir))
            for (const auto& f : std::filesystem::directory_iterator(dir))
                if (f.path().filename().string().rfind("ptx-sm", 0) == 0)
                    e.push_back(f.path());
        std::sort(e.begin(), e.end());
        return e;
    };
    cuda::PtxCacheStats s;
    const std::string want80 = cuda::compile_ptx(l.kernel, 80);
    EXPECT_EQ(cuda::cached_ptx(l.kernel, 80, &s), want80);
    EXPECT_EQ(cuda::cached_ptx(l.kernel, 90, &s), cuda::compile_ptx(l.kernel, 90));
    EXPECT_EQ(s.compiles, 2);
    EXPECT_EQ(s.disk_writes, 2);
    ASSERT_EQ(entries().size(), 2u) << "one entry per architecture";
    EXPECT_NE(entries()[0].filename().string().find("ptx-sm80-"), std::string::npos);

    cuda::PtxCacheStats again;
    EXPECT_EQ(cuda::cached_ptx(l.kernel, 80, &again), want80);
    EXPECT_EQ(again.disk_hits, 1);
    EXPECT_EQ(again.compiles, 0);

    { // damage the sm_80 entry's last bytes (the PTX text): its checksum no longer matches
        const auto e = entries()[0];
        std::fstream f(e, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(-4, std::ios::end);
        f.write("XXXX", 4);
    }
    cuda::PtxCacheStats damaged;
    EXPECT_EQ(cuda::cached_ptx(l.kernel, 80, &damaged), want80);
    EXPECT_EQ(damaged.disk_rejects, 1);
    EXPECT_EQ(damaged.compiles, 1);
    EXPECT_EQ(damaged.disk_writes, 1);

    std::filesystem::remove_all(dir);
    setenv("SJ_CACHE_DIR", "off", 1);
    cuda::PtxCacheStats off;
    EXPECT_EQ(cuda::cached_ptx(l.kernel, 80, &off), want80);
    EXPECT_EQ(off.compiles, 1);
    EXPECT_EQ(off.disk_writes, 0);
    EXPECT_TRUE(entries().empty());
}

TEST(GpuKernel, BlocksKernelRunsOnlyWithItsOwnWidth) {
    // a Blocks kernel launched with fewer threads than its tree was written for would leave
    // the tree's upper half unwritten on a GPU; the emulator refuses the launch
    Placeholder x({8, 256}, f32, "x");
    Bound b = bind_one({sum(x, {1})});
    auto dev = cuda::make_emulator();
    cuda::GpuLaunch l = cuda::choose_launch(b.launch, dev->info().limits);
    ASSERT_EQ(l.kernel.map, cuda::ThreadMap::Blocks);
    auto k = dev->load(l.kernel);
    EXPECT_THROW(dev->launch(*k, 1, l.block / 2, 0, 0), InternalError);
}

// The kernel caches (the device's table, the PTX on disk) are keyed by GpuKernel::str: kernels
// that differ in any field, the split reduction's phase and chunk count too, have different
// keys and different code.
TEST(GpuKernel, EveryFieldIsInTheCacheKey) {
    Placeholder x({1, 4096}, f32, "x");
    Bound b = bind_one({sum(x, {1})});
    ASSERT_NE(b.group, nullptr);
    cuda::GpuKernel whole;
    whole.spec = b.launch.spec;
    whole.map = cuda::ThreadMap::Blocks;
    whole.block = 64;
    cuda::GpuKernel partials4 = whole, partials8 = whole, combine = whole, points = whole;
    partials4.phase = partials8.phase = cuda::GpuPhase::Partials;
    partials4.chunks = 4;
    partials8.chunks = 8;
    points.map = combine.map = cuda::ThreadMap::Points;
    combine.phase = cuda::GpuPhase::Combine;
    combine.chunks = 4;
    const std::vector<cuda::GpuKernel> ks{whole, partials4, partials8, points, combine};
    auto dev = cuda::make_emulator();
    for (size_t i = 0; i < ks.size(); ++i)
        for (size_t j = i + 1; j < ks.size(); ++j) {
            EXPECT_NE(ks[i].str(), ks[j].str()) << i << " and " << j;
            EXPECT_NE(dev->load(ks[i]), dev->load(ks[j])) << i << " and " << j;
        }
}
