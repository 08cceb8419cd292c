// Tests of src/io/Checkpoint.cpp: safetensors round trips, header validation, all-or-nothing
// loads and crash safety of saves (a child process killed mid-save).
#include "TestUtil.h"

#include <gtest/gtest.h>
#include <symjax/Checkpoint.h>
#include <symjax/Scope.h>
#include <symjax/Variable.h>
#include <symjax/ir/VariableState.h>

#include <nlohmann/json.hpp>

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

using namespace sj;
using sj::test::io_error;
namespace fs = std::filesystem;

namespace {

struct TempDir {
    fs::path path;
    TempDir() {
        std::string tmpl = (fs::temp_directory_path() / "sj_ckpt_XXXXXX").string();
        path = ::mkdtemp(tmpl.data());
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    std::string operator/(const std::string& name) const { return (path / name).string(); }
    /// Names of the files in the folder.
    std::vector<std::string> files() const {
        std::vector<std::string> out;
        for (const auto& e : fs::directory_iterator(path)) out.push_back(e.path().filename());
        std::sort(out.begin(), out.end());
        return out;
    }
};

using Bytes = std::vector<uint8_t>;

Bytes read_bytes(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return Bytes(std::istreambuf_iterator<char>(f), {});
}

void write_bytes(const std::string& path, const Bytes& b) {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

/// A safetensors file by hand: header length, header text, data.
Bytes st_file(const std::string& header, const Bytes& data) {
    Bytes b;
    for (int i = 0; i < 8; ++i)
        b.push_back(static_cast<uint8_t>(uint64_t(header.size()) >> (8 * i)));
    b.insert(b.end(), header.begin(), header.end());
    b.insert(b.end(), data.begin(), data.end());
    return b;
}

Bytes f32_bytes(std::vector<float> v) {
    Bytes b(v.size() * 4);
    std::memcpy(b.data(), v.data(), b.size());
    return b;
}


/// One array of every dtype (and a scalar and an empty one).
std::map<std::string, Array> every_dtype() {
    std::map<std::string, Array> m;
    m["f32"] = Array(std::vector<float>{1.5f, -2.f, 3.25f, 0.f, 1e-30f, -7.f}, {2, 3});
    m["f64"] = Array(std::vector<double>{1.0 / 3, -1e300, 2.5, 0.0}, {4});
    m["i32"] = Array(std::vector<int32_t>{-5, 2147483647, 0}, {3, 1});
    m["i64"] = Array(std::vector<int64_t>{int64_t(1) << 50, -3}, {2});
    m["u8"] = Array(std::vector<uint8_t>{0, 255, 7, 8, 9}, {5});
    m["u32"] = Array(std::vector<uint32_t>{4000000000u, 1}, {1, 2});
    m["bool"] = Array(std::vector<bool>{true, false, true}, {3});
    m["scalar"] = Array::scalar<float>(42.f);
    m["empty"] = Array(DType::F32, {0, 3});
    return m;
}

} // namespace

TEST(Checkpoint, RoundTripEveryDtype) {
    TempDir t;
    auto m = every_dtype();
    write_safetensors(t / "m.safetensors", m, {{"format", "sj"}, {"step", "12"}});
    std::map<std::string, std::string> meta;
    auto r = read_safetensors(t / "m.safetensors", &meta);
    ASSERT_EQ(r.size(), m.size());
    for (const auto& [name, a] : m) {
        ASSERT_TRUE(r.count(name)) << name;
        EXPECT_TRUE(r[name].equals(a)) << name << ": " << r[name].str() << " vs " << a.str();
    }
    EXPECT_EQ(meta, (std::map<std::string, std::string>{{"format", "sj"}, {"step", "12"}}));
    EXPECT_EQ(t.files(), std::vector<std::string>{"m.safetensors"}); // no temporary left
}

TEST(Checkpoint, FileLayoutIsSafetensors) {
    TempDir t;
    write_safetensors(t / "a.st", {{"w", Array(std::vector<float>{1.f, 2.f}, {1, 2})},
                                   {"n", Array(std::vector<int64_t>{-1})}});
    Bytes b = read_bytes(t / "a.st");
    uint64_t n = 0;
    for (int i = 7; i >= 0; --i) n = n << 8 | b[i];
    EXPECT_EQ((8 + n) % 8, 0u); // the data section is aligned
    auto h = nlohmann::json::parse(std::string(b.begin() + 8, b.begin() + 8 + long(n)));
    EXPECT_EQ(h["w"]["dtype"], "F32");
    EXPECT_EQ(h["w"]["shape"], nlohmann::json({1, 2}));
    EXPECT_EQ(h["n"]["dtype"], "I64");
    const auto wo = h["w"]["data_offsets"].get<std::vector<uint64_t>>();
    ASSERT_EQ(wo.size(), 2u);
    float w1;
    std::memcpy(&w1, b.data() + 8 + n + wo[0] + 4, 4);
    EXPECT_EQ(w1, 2.f);
    EXPECT_EQ(b.size(), 8 + n + 16);

    // A file as the reference (Python) implementation writes it reads back.
    std::string header = R"({"__metadata__":{"format":"pt"},"x":{"dtype":"F32","shape":[2],)"
                         R"("data_offsets":[0,8]},"y":{"dtype":"U8","shape":[],)"
                         R"("data_offsets":[8,9]}})";
    header.append((8 - (8 + header.size()) % 8) % 8, ' ');
    Bytes d = f32_bytes({0.5f, -4.f});
    d.push_back(200);
    write_bytes(t / "py.st", st_file(header, d));
    auto r = read_safetensors(t / "py.st");
    EXPECT_EQ(r["x"].to_vector<float>(), (std::vector<float>{0.5f, -4.f}));
    EXPECT_EQ(r["y"].shape(), Shape{});
    EXPECT_EQ(r["y"].item<int>(), 200);
}

TEST(Checkpoint, EveryHeaderRuleIsChecked) {
    TempDir t;
    const Bytes d12 = f32_bytes({1, 2, 3}); // 12 data bytes
    const std::string b_ok = R"("b":{"dtype":"I32","shape":[1],"data_offsets":[8,12]})";
    auto hdr = [&](const std::string& a) { return "{" + a + "," + b_ok + "}"; };
    struct Case {
        std::string name;
        Bytes file;
        std::vector<std::string> expect;
    };
    const std::string a_ok = R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})";
    Bytes huge = st_file(hdr(a_ok), d12);
    huge[1] = 0x10; // header length 4096 + ...
    Bytes zero = st_file("", d12);
    std::string dup = "{" + a_ok + "," + a_ok + "," + b_ok + "}";
    const std::string good = hdr(a_ok);
    const auto data_at = [&](const std::string& h, uint64_t off) {
        return "byte " + std::to_string(8 + h.size() + off) + ":";
    };
    std::string gap_h = "{" + a_ok + R"(,"b":{"dtype":"I32","shape":[1],"data_offsets":[12,16]}})";
    std::string bool_h = "{" + a_ok + R"(,"c":{"dtype":"BOOL","shape":[2],"data_offsets":[8,10]}})";
    // duplicate names inside an entry and in __metadata__ (nlohmann::json would keep the last)
    const std::string a_dupfield =
        R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"dtype":"I32"})";
    const std::string meta_dup = R"({"__metadata__":{"k":"1","j":"2","k":"3"},)";
    const std::string meta_twice = R"({"__metadata__":{"k":"1"},"__metadata__":{"k":"2"},)";
    // offsets of the second spelling: entry a starts at file byte 9 (8 + the '{')
    const auto second = [](const std::string& text, const std::string& key) {
        return text.find(key, text.find(key) + 1);
    };
    const std::string dupfield_at =
        "byte " + std::to_string(9 + second(a_dupfield, "\"dtype\"")) + ":";
    const std::string metadup_at = "byte " + std::to_string(8 + second(meta_dup, "\"k\"")) + ":";
    const std::string metatwice_at =
        "byte " + std::to_string(8 + second(meta_twice, "\"__metadata__\"")) + ":";
    Bytes bool_data = f32_bytes({1, 2});
    bool_data.push_back(1);
    bool_data.push_back(2);
    std::vector<Case> cases = {
        {"short", {1, 2, 3, 4}, {"byte 0:", "too short"}},
        {"huge", huge, {"byte 0:", "exceeds the file size"}},
        {"zero", zero, {"byte 0:", "too small"}},
        {"json", st_file(R"({"a": {"dtype": )", d12), {"byte 2", "not valid JSON"}},
        // a number beyond double's range: nlohmann::json throws out_of_range, not parse_error
        // (found by fuzz/fuzz_safetensors)
        {"bignum", st_file(hdr(R"("a":{"dtype":"F32","shape":[7e777],"data_offsets":[0,8]})"), d12),
         {"byte 8:", "cannot be read as JSON", "number overflow"}},
        {"array", st_file("[1, 2]", d12), {"byte 8:", "not an object"}},
        {"dtype", st_file(hdr(R"("a":{"dtype":"Q8","shape":[2],"data_offsets":[0,8]})"), d12),
         {"byte 9:", "tensor 'a'", "\"Q8\" is not a safetensors dtype"}},
        {"f16", st_file(hdr(R"("a":{"dtype":"F16","shape":[4],"data_offsets":[0,8]})"), d12),
         {"byte 9:", "\"F16\" is not supported by symjax"}},
        {"nodtype", st_file(hdr(R"("a":{"shape":[2],"data_offsets":[0,8]})"), d12),
         {"missing or non-string \"dtype\""}},
        {"negdim", st_file(hdr(R"("a":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]})"), d12),
         {"byte 9:", "negative dim"}},
        {"floatdim", st_file(hdr(R"("a":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]})"), d12),
         {"non-integer"}},
        {"noshape", st_file(hdr(R"("a":{"dtype":"F32","shape":2,"data_offsets":[0,8]})"), d12),
         {"non-array \"shape\""}},
        {"range", st_file(hdr(R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,100]})"), d12),
         {"byte 9:", "out of range", "holds 12 bytes"}},
        {"reversed", st_file(hdr(R"("a":{"dtype":"F32","shape":[2],"data_offsets":[8,0]})"), d12),
         {"out of range"}},
        {"negoff", st_file(hdr(R"("a":{"dtype":"F32","shape":[2],"data_offsets":[-8,0]})"), d12),
         {"non-negative integers"}},
        {"three", st_file(hdr(R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,4,8]})"), d12),
         {"[begin, end]"}},
        {"size", st_file(hdr(R"("a":{"dtype":"F32","shape":[3],"data_offsets":[0,8]})"), d12),
         {"byte 9:", "span 8 bytes, but F32[3] needs 12"}},
        {"overlap",
         st_file("{" + a_ok + R"(,"b":{"dtype":"I32","shape":[1],"data_offsets":[4,8]}})", d12),
         {"overlaps"}},
        {"gap", st_file(gap_h, f32_bytes({1, 2, 3, 4})), {data_at(gap_h, 8), "gap of 4 bytes"}},
        {"trailing", st_file(good, f32_bytes({1, 2, 3, 4})),
         {data_at(good, 12), "4 bytes after the last tensor"}},
        {"dup",
         st_file(dup, d12),
         {"duplicate header entry 'a'", "byte " + std::to_string(9 + a_ok.size() + 1) + ":"}},
        {"dupfield", st_file(hdr(a_dupfield), d12),
         {dupfield_at, "tensor 'a': duplicate field 'dtype'"}},
        {"dupmeta", st_file(meta_dup + a_ok + "," + b_ok + "}", d12),
         {metadup_at, "__metadata__: duplicate key 'k'"}},
        {"twometa", st_file(meta_twice + a_ok + "," + b_ok + "}", d12),
         {metatwice_at, "duplicate header entry '__metadata__'"}},
        {"field",
         st_file(hdr(R"("a":{"dtype":"F32","shape":[2],"data_offsets":[0,8],"x":1})"), d12),
         {"unknown field 'x'"}},
        {"meta", st_file(R"({"__metadata__":{"k":1},)" + a_ok + "," + b_ok + "}", d12),
         {"__metadata__ value of 'k' is not a string"}},
        {"noname", st_file(hdr(R"("":{"dtype":"F32","shape":[2],"data_offsets":[0,8]})"), d12),
         {"empty tensor name"}},
        {"bool", st_file(bool_h, bool_data),
         {data_at(bool_h, 9), "BOOL byte 2 is not 0 or 1"}},
    };
    write_bytes(t / "good.st", st_file(good, d12));
    EXPECT_EQ(read_safetensors(t / "good.st").size(), 2u); // the base case is valid
    for (const Case& c : cases) {
        const std::string path = t / (c.name + ".st");
        write_bytes(path, c.file);
        std::string msg = io_error([&] { read_safetensors(path); });
        EXPECT_CONTAINS(msg, path + ": byte ");
        for (const auto& e : c.expect) EXPECT_CONTAINS(msg, e) << " (case " << c.name << ")";
    }
    std::string msg = io_error([&] { read_safetensors(t / "absent.st"); });
    EXPECT_CONTAINS(msg, t / "absent.st");
}

TEST(Checkpoint, SaveAndLoadVariablesOfEveryDtype) {
    TempDir t;
    Scope s("ckpt_all");
    std::vector<Variable> vars;
    auto m = every_dtype();
    for (const auto& [name, a] : m) vars.emplace_back(a, name);
    save_variables(t / "v.st", "ckpt_all/*", {{"epoch", "3"}});
    auto r = read_safetensors(t / "v.st");
    EXPECT_EQ(r.size(), m.size());
    EXPECT_TRUE(r.count("ckpt_all/f32"));
    for (const Variable& v : vars) v.assign(Array::full(v.state().dtype, v.state().shape, 1));
    load_variables(t / "v.st", "ckpt_all/*");
    for (const Variable& v : vars) {
        const std::string key = v.full_name().substr(std::string("ckpt_all/").size());
        EXPECT_TRUE(v.value().equals(m[key])) << v.full_name();
    }
}

TEST(Checkpoint, GlobFiltersSaveAndLoad) {
    TempDir t;
    Scope s("ckpt_glob");
    Variable ew(Array(std::vector<float>{1, 2, 3, 4}, {2, 2}), "enc/w");
    Variable eb(Array(std::vector<float>{5}), "enc/b");
    Variable dw(Array(std::vector<int32_t>{6, 7}), "dec/w");
    save_variables(t / "enc.st", "ckpt_glob/enc/*");
    auto r = read_safetensors(t / "enc.st");
    EXPECT_EQ(r.size(), 2u);
    EXPECT_TRUE(r.count("ckpt_glob/enc/w") && r.count("ckpt_glob/enc/b"));
    save_variables(t / "all.st", "ckpt_glob/*");

    for (const Variable* v : {&ew, &eb}) v->assign(Array::full(DType::F32, v->state().shape, 0));
    dw.assign(Array(std::vector<int32_t>{0, 0}));
    load_variables(t / "all.st", "ckpt_glob/enc/*"); // only enc/ changes
    EXPECT_EQ(ew.value().to_vector<float>(), (std::vector<float>{1, 2, 3, 4}));
    EXPECT_EQ(eb.value().to_vector<float>(), (std::vector<float>{5}));
    EXPECT_EQ(dw.value().to_vector<int>(), (std::vector<int>{0, 0}));

    // A variable the file lacks.
    std::string msg = io_error([&] { load_variables(t / "enc.st", "ckpt_glob/*"); });
    EXPECT_CONTAINS(msg, t / "enc.st");
    EXPECT_CONTAINS(msg, "no tensor for variable 'ckpt_glob/dec/w' (i32[2])");
    // A tensor that matches the glob but no variable.
    {
        Variable extra(Array(std::vector<float>{1}), "extra");
        save_variables(t / "extra.st", "ckpt_glob/*");
    }
    msg = io_error([&] { load_variables(t / "extra.st", "ckpt_glob/*"); });
    EXPECT_CONTAINS(msg, "tensor 'ckpt_glob/extra' matches 'ckpt_glob/*' but no live variable");
    EXPECT_CONTAINS(msg, "byte ");
    // Shape and dtype must be the variable's.
    write_safetensors(t / "shape.st", {{"ckpt_glob/enc/w", Array(std::vector<float>{1, 2, 3})},
                                       {"ckpt_glob/enc/b", Array(std::vector<float>{5})}});
    msg = io_error([&] { load_variables(t / "shape.st", "ckpt_glob/enc/*"); });
    EXPECT_CONTAINS(msg, "tensor 'ckpt_glob/enc/w' is f32[3] but the variable is f32[2, 2]");
    write_safetensors(t / "dtype.st", {{"ckpt_glob/enc/w", Array(DType::F64, {2, 2})},
                                       {"ckpt_glob/enc/b", Array(std::vector<float>{5})}});
    msg = io_error([&] { load_variables(t / "dtype.st", "ckpt_glob/enc/*"); });
    EXPECT_CONTAINS(msg, "is f64[2, 2] but the variable is f32[2, 2]");

    EXPECT_THROW(save_variables(t / "none.st", "no_such_scope/*"), InputError);
    EXPECT_FALSE(fs::exists(t / "none.st"));
}

TEST(Checkpoint, LoadIsAllOrNothing) {
    TempDir t;
    Scope s("ckpt_aon");
    Variable a(Array(std::vector<float>{1, 1}), "a");
    Variable b(Array(std::vector<float>{2, 2}), "b");
    Variable c(Array(std::vector<bool>{true, false}), "c");
    save_variables(t / "good.st", "ckpt_aon/*");
    auto tensors = read_safetensors(t / "good.st");
    tensors["ckpt_aon/a"] = Array(std::vector<float>{10, 10});
    tensors["ckpt_aon/b"] = Array(std::vector<float>{20, 20});
    auto check_unchanged = [&] {
        EXPECT_EQ(a.value().to_vector<float>(), (std::vector<float>{1, 1}));
        EXPECT_EQ(b.value().to_vector<float>(), (std::vector<float>{2, 2}));
        EXPECT_EQ(c.value().to_vector<int>(), (std::vector<int>{1, 0}));
    };
    // Two good new tensors, then one of the wrong shape (c sorts last).
    tensors["ckpt_aon/c"] = Array(std::vector<bool>{true, true, true});
    write_safetensors(t / "shape.st", tensors);
    io_error([&] { load_variables(t / "shape.st", "ckpt_aon/*"); });
    check_unchanged();
    // Two good new tensors, then bytes that do not decode (a BOOL of 5).
    tensors["ckpt_aon/c"] = Array(std::vector<bool>{true, true});
    write_safetensors(t / "bytes.st", tensors);
    Bytes raw = read_bytes(t / "bytes.st");
    raw[raw.size() - 1] = 5; // c is stored last
    write_bytes(t / "bytes.st", raw);
    std::string msg = io_error([&] { load_variables(t / "bytes.st", "ckpt_aon/*"); });
    EXPECT_CONTAINS(msg, "byte " + std::to_string(raw.size() - 1) + ":");
    check_unchanged();
    // And the same file, repaired, loads every tensor.
    raw[raw.size() - 1] = 0;
    write_bytes(t / "bytes.st", raw);
    load_variables(t / "bytes.st", "ckpt_aon/*");
    EXPECT_EQ(a.value().to_vector<float>(), (std::vector<float>{10, 10}));
    EXPECT_EQ(c.value().to_vector<int>(), (std::vector<int>{1, 0}));
}

TEST(Checkpoint, FailedSaveLeavesTargetAndNoTemporary) {
    TempDir t;
    write_safetensors(t / "keep.st", {{"x", Array(std::vector<float>{1})}});
    std::string msg = io_error(
        [&] { write_safetensors(t / "missing_dir/x.st", {{"x", Array(std::vector<float>{1})}}); });
    EXPECT_CONTAINS(msg, t / "missing_dir/x.st");
    EXPECT_THROW(write_safetensors(t / "keep.st", {{"__metadata__", Array(std::vector<float>{1})}}),
                 InputError);
    EXPECT_THROW(write_safetensors(t / "keep.st", {{"u", Array()}}), InputError);
    EXPECT_EQ(read_safetensors(t / "keep.st").at("x").to_vector<float>(), std::vector<float>{1});
    EXPECT_EQ(t.files(), std::vector<std::string>{"keep.st"});
    // Overwriting replaces the content.
    write_safetensors(t / "keep.st", {{"y", Array(std::vector<int32_t>{3})}});
    auto r = read_safetensors(t / "keep.st");
    EXPECT_EQ(r.size(), 1u);
    EXPECT_TRUE(r.count("y"));
}

// The temporary file must fit NAME_MAX (255 bytes) whatever the checkpoint's name: a 250-byte
// name (and one of 255) is saved and read back, with nothing left beside it.
TEST(Checkpoint, LongFileNamesSave) {
    TempDir t;
    for (size_t len : {size_t(250), size_t(255)}) {
        const std::string name = std::string(len - 3, 'c') + ".st";
        ASSERT_EQ(name.size(), len);
        write_safetensors(t / name, {{"x", Array(std::vector<float>{1, 2})}}, {{"k", "v"}});
        EXPECT_EQ(read_safetensors(t / name).at("x").to_vector<float>(),
                  (std::vector<float>{1, 2}));
        EXPECT_EQ(t.files(), std::vector<std::string>{name});
        fs::remove(t / name);
    }
    // a multi-byte UTF-8 name (the temporary's prefix is cut between characters)
    std::string utf8;
    while (utf8.size() < 240) utf8 += "\xc3\xa9"; // é
    utf8 += ".st";
    write_safetensors(t / utf8, {{"x", Array(std::vector<float>{3})}});
    EXPECT_EQ(read_safetensors(t / utf8).at("x").to_vector<float>(), std::vector<float>{3});
    EXPECT_EQ(t.files(), std::vector<std::string>{utf8});
    fs::remove(t / utf8);
    // a name the file system refuses: a clear error, and no temporary left behind
    const std::string too_long = std::string(253, 'd') + ".st";
    std::string msg =
        io_error([&] { write_safetensors(t / too_long, {{"x", Array::scalar(1.f)}}); });
    EXPECT_CONTAINS(msg, t / too_long);
    EXPECT_TRUE(t.files().empty()) << t.files()[0];
}

// A child process saves large checkpoints in a loop and is SIGKILLed at random moments: the file
// on disk must always be a complete checkpoint, old or new, that loads.
TEST(Checkpoint, SigkillDuringSaveNeverLeavesAPartialFile) {
    TempDir t;
    const std::string path = t / "crash.st";
    Scope s("ckpt_crash");
    const int64_t n = 1 << 18; // 1 MiB per checkpoint
    Variable big(Array::full(DType::F32, {n}, 0), "big");
    Variable gen(Array::scalar<int64_t>(0), "gen");
    // Kill delays are drawn (seeded) over a few save durations, as fast as this disk's fsync.
    auto t0 = std::chrono::steady_clock::now();
    for (int k = 0; k < 3; ++k) save_variables(path, "ckpt_crash/*");
    const auto save_us = std::max<int64_t>(
        200, std::chrono::duration_cast<std::chrono::microseconds>(
                 std::chrono::steady_clock::now() - t0).count() / 3);

    std::mt19937_64 rng(20240601);
    int64_t last = 0;
    int advanced = 0, interrupted = 0;
    const int iterations = 30;
    for (int it = 0; it < iterations; ++it) {
        int ready[2];
        ASSERT_EQ(::pipe(ready), 0);
        pid_t pid = ::fork();
        ASSERT_GE(pid, 0);
        if (pid == 0) {
            ::close(ready[0]);
            try {
                for (int64_t g = (it + 1) * 10000 + 1; g < (it + 2) * 10000; ++g) {
                    big.assign(Array::full(DType::F32, {n}, double(g)));
                    gen.assign(Array::scalar<int64_t>(g));
                    save_variables(path, "ckpt_crash/*", {{"gen", std::to_string(g)}});
                    // ready after a whole save: the child's first writes fault in its copies
                    // of the parent's pages, which in a large parent (the whole test binary in
                    // one process) took longer than the kill delays drawn from save_us
                    if (g % 10000 == 1)
                        (void)!::write(ready[1], "r", 1);
                }
            } catch (...) {
            }
            ::_exit(3); // reached only when a save failed (the parent kills it long before)
        }
        ::close(ready[1]);
        char c;
        ASSERT_EQ(::read(ready[0], &c, 1), 1);
        ::close(ready[0]);
        std::this_thread::sleep_for(std::chrono::microseconds(rng() % (3 * save_us)));
        ::kill(pid, SIGKILL);
        int status = 0;
        ASSERT_EQ(::waitpid(pid, &status, 0), pid);
        ASSERT_TRUE(WIFSIGNALED(status)) << "the saving child exited by itself: a save failed";

        load_variables(path, "ckpt_crash/*"); // must parse and validate completely
        const int64_t g = gen.value().item<int64_t>();
        std::vector<float> v = big.value().to_vector<float>();
        ASSERT_TRUE(std::all_of(v.begin(), v.end(), [&](float x) { return x == float(g); }))
            << "iteration " << it << ": tensors from different saves";
        std::map<std::string, std::string> meta;
        read_safetensors(path, &meta);
        if (g > 0) EXPECT_EQ(meta["gen"], std::to_string(g));
        ASSERT_EQ(g / 10000, it + 1)
            << "iteration " << it << ": gen " << g << " (the child signals after its first save)";
        advanced += g != last;
        last = g;
        for (const std::string& f : t.files())
            if (f != "crash.st") {
                ++interrupted; // a temporary left by a kill inside a save
                fs::remove(t / f);
            }
    }
    RecordProperty("advanced", advanced);
    RecordProperty("interrupted", interrupted);
    RecordProperty("save_us", static_cast<int>(save_us));
    EXPECT_GE(advanced, 3);    // saves did complete between kills
    EXPECT_GE(interrupted, 3); // and kills did land inside saves
}
