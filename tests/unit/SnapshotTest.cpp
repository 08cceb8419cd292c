// Readers of variables see one step's values while another thread trains (Note [Consistent
// snapshots] in src/runtime/Variable.cpp), and dead variables give their names back.
#include "TestUtil.h"

#include <gtest/gtest.h>
#include <symjax/symjax.h>

#include <atomic>
#include <filesystem>
#include <thread>

using namespace sj;

namespace {

/// The step whose value `a` holds when every element equals it, else -1 (a torn copy).
int64_t one_step(const Array& a) {
    const float* p = a.data<float>();
    for (int64_t i = 1; i < a.size(); ++i)
        if (p[i] != p[0]) return -1;
    return int64_t(p[0]);
}

constexpr int64_t kSize = 1 << 18; // 1 MiB: a step's in-place pass takes long enough to overlap
constexpr int kSteps = 300;

} // namespace

TEST(Snapshot, ValueDuringInPlaceStepsIsOneStep) {
    for (const char* backend : {"cpu", "reference"}) {
        Variable w(Array(f32, {kSize}), "snap_w");
        Function step = function({}, {}, {{w, w + 1.0}}, test::on(backend));
        std::atomic<bool> done{false};
        std::thread trainer([&] {
            for (int i = 0; i < kSteps; ++i) step();
            done = true;
        });
        int64_t reads = 0, torn = 0, last = 0;
        while (!done) {
            int64_t k = one_step(w.value());
            ++reads;
            if (k < 0) ++torn;
            else {
                EXPECT_GE(k, last) << "a value went back in time";
                last = k;
            }
        }
        trainer.join();
        EXPECT_EQ(torn, 0) << torn << " of " << reads << " copies mixed two steps (" << backend << ")";
        EXPECT_EQ(one_step(w.value()), kSteps);
    }
}

TEST(Snapshot, CheckpointsDuringTrainingHoldOneStepOfEveryVariable) {
    namespace fs = std::filesystem;
    fs::path dir = fs::temp_directory_path() / ("sj_snapshot_" + std::to_string(::getpid()));
    fs::create_directories(dir);
    Scope sc("snapckpt");
    Variable a(Array(f32, {kSize}), "a"), b(Array(f32, {kSize}), "b");
    // two variables updated by one step: a checkpoint must hold the same step of both
    Function step = function({}, {}, {{a, a + 1.0}, {b, b + 1.0}});
    std::atomic<bool> done{false}, saving{true};
    std::thread trainer([&] {
        for (int i = 0; i < kSteps || saving; ++i) step(); // at least until the saves are made
        done = true;
    });
    std::vector<std::string> files;
    for (int i = 0; i < 20; ++i) {
        std::string f = (dir / ("c" + std::to_string(i) + ".safetensors")).string();
        save_variables(f, "snapckpt/*");
        files.push_back(f);
    }
    saving = false;
    trainer.join();
    for (const auto& f : files) {
        load_variables(f, "snapckpt/*"); // back into a and b
        int64_t ka = one_step(a.value()), kb = one_step(b.value());
        EXPECT_GE(ka, 0) << f << ": a is torn";
        EXPECT_EQ(ka, kb) << f << ": a and b are from different steps";
    }
    fs::remove_all(dir);
}

TEST(Snapshot, CallsOnDisjointVariablesStillRunConcurrently) {
    // each function holds only its own variables' locks: two trainers never wait on each other
    Variable x(Array(f32, {16}), "conc_x"), y(Array(f32, {16}), "conc_y");
    Function fx = function({}, {}, {{x, x + 1.0}}), fy = function({}, {}, {{y, y + 1.0}});
    std::thread t1([&] {
        for (int i = 0; i < 2000; ++i) fx();
    });
    std::thread t2([&] {
        for (int i = 0; i < 2000; ++i) fy();
    });
    t1.join();
    t2.join();
    EXPECT_EQ(one_step(x.value()), 2000);
    EXPECT_EQ(one_step(y.value()), 2000);
}

TEST(VariableNames, DeadVariablesGiveTheirNamesBack) {
    // two alive at a time, 100,000 made: names stay v, v_1 (the counter used to reach v_100000)
    std::string first;
    {
        Variable keep(Array(f32, {1}), "recycled");
        first = keep.full_name();
        for (int i = 0; i < 100000; ++i) {
            Variable v(Array(f32, {1}), "recycled");
            ASSERT_EQ(v.full_name(), first + "_1") << "at " << i;
        }
        EXPECT_EQ(get_variables("recycled*").size(), 1u);
    }
    EXPECT_TRUE(get_variables("recycled*").empty());
    Variable again(Array(f32, {1}), "recycled");
    EXPECT_EQ(again.full_name(), first);
}

TEST(VariableNames, AUserNameThatLooksLikeASuffixIsNotReused) {
    Variable a(Array(f32, {1}), "clash"), b(Array(f32, {1}), "clash_1");
    Variable c(Array(f32, {1}), "clash");
    EXPECT_EQ(a.full_name(), "clash");
    EXPECT_EQ(b.full_name(), "clash_1");
    EXPECT_EQ(c.full_name(), "clash_2");
}
