// Tests of src/data: IDX, CIFAR-10 binary, PNG/JPEG folder and list readers, and the Loader.
#include "TestUtil.h"

#include <gtest/gtest.h>
#include <symjax/Data.h>
#include <symjax/nn/DataParallel.h>

#include <jpeglib.h>
#include <png.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <thread>

using namespace sj;
using sj::test::io_error;
using namespace sj::data;
namespace fs = std::filesystem;

namespace {

/// A fresh folder under the system temp dir, removed with everything in it at scope exit.
struct TempDir {
    fs::path path;
    TempDir() {
        std::string tmpl = (fs::temp_directory_path() / "sj_data_XXXXXX").string();
        path = ::mkdtemp(tmpl.data());
    }
    ~TempDir() {
        std::error_code ec;
        fs::remove_all(path, ec);
    }
    std::string operator/(const std::string& name) const { return (path / name).string(); }
};

using Bytes = std::vector<uint8_t>;

void write_bytes(const std::string& path, const Bytes& b) {
    fs::create_directories(fs::path(path).parent_path());
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
}

Bytes read_bytes(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return Bytes(std::istreambuf_iterator<char>(f), {});
}

Bytes gzip(const Bytes& in) {
    z_stream zs{};
    deflateInit2(&zs, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
    Bytes out(deflateBound(&zs, in.size()) + 64);
    zs.next_in = const_cast<Bytef*>(in.data());
    zs.avail_in = static_cast<uInt>(in.size());
    zs.next_out = out.data();
    zs.avail_out = static_cast<uInt>(out.size());
    EXPECT_EQ(deflate(&zs, Z_FINISH), Z_STREAM_END);
    out.resize(zs.total_out);
    deflateEnd(&zs);
    return out;
}

void put_be32(Bytes& b, uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<uint8_t>(v >> s));
}

/// An IDX file: magic 00 00 type rank, big-endian dims, then `data` (already big-endian).
Bytes idx_file(uint8_t type, const std::vector<uint32_t>& dims, const Bytes& data) {
    Bytes b = {0, 0, type, static_cast<uint8_t>(dims.size())};
    for (uint32_t d : dims) put_be32(b, d);
    b.insert(b.end(), data.begin(), data.end());
    return b;
}

/// A gzip bomb: a member whose data is `head` then `mib` MiB of zeros, from one deflate piece of
/// 1 MiB of zeros (about 1 KiB, decodable on its own after a full flush) repeated `mib` times.
/// The stream has no last block and no trailer: a reader that decodes all of it inflates
/// `mib` MiB and then fails with "truncated gzip stream".
Bytes gzip_bomb(const Bytes& head, int mib) {
    z_stream zs{};
    EXPECT_EQ(deflateInit2(&zs, 9, Z_DEFLATED, -MAX_WBITS, 9, Z_DEFAULT_STRATEGY), Z_OK);
    auto deflate_all = [&](const Bytes& in) {
        Bytes out(deflateBound(&zs, in.size()) + 64);
        zs.next_in = const_cast<Bytef*>(in.data());
        zs.avail_in = static_cast<uInt>(in.size());
        zs.next_out = out.data();
        zs.avail_out = static_cast<uInt>(out.size());
        EXPECT_EQ(deflate(&zs, Z_FULL_FLUSH), Z_OK);
        EXPECT_EQ(zs.avail_in, 0u);
        out.resize(out.size() - zs.avail_out);
        return out;
    };
    Bytes b = {0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 3}; // gzip header: deflate, no name, Unix
    Bytes first = deflate_all(head);
    Bytes piece = deflate_all(Bytes(size_t(1) << 20, 0));
    deflateEnd(&zs);
    b.insert(b.end(), first.begin(), first.end());
    for (int i = 0; i < mib; ++i) b.insert(b.end(), piece.begin(), piece.end());
    return b;
}

Bytes iota_bytes(size_t n, int start = 0) {
    Bytes b(n);
    for (size_t i = 0; i < n; ++i) b[i] = static_cast<uint8_t>((start + i * 7) % 256);
    return b;
}


/// Interleaved HWC pixels of a test image: channel c of pixel (y, x) is a function of all three.
Bytes pattern(int h, int w, int c, int seed) {
    Bytes p(static_cast<size_t>(h * w * c));
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
            for (int k = 0; k < c; ++k)
                p[(y * w + x) * c + k] = static_cast<uint8_t>(seed * 31 + y * 13 + x * 5 + k * 80);
    return p;
}

/// Smooth pixels (JPEG's lossy coding keeps these close).
Bytes smooth(int h, int w, int c, int seed) {
    Bytes p(static_cast<size_t>(h * w * c));
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
            for (int k = 0; k < c; ++k)
                p[(y * w + x) * c + k] =
                    static_cast<uint8_t>(40 + seed * 10 + y * 3 + x * 2 + k * 30);
    return p;
}

void write_png(const std::string& path, int h, int w, int c, const Bytes& hwc) {
    fs::create_directories(fs::path(path).parent_path());
    png_image img;
    std::memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    img.width = w;
    img.height = h;
    img.format = c == 3 ? PNG_FORMAT_RGB : c == 4 ? PNG_FORMAT_RGBA : PNG_FORMAT_GRAY;
    ASSERT_TRUE(png_image_write_to_file(&img, path.c_str(), 0, hwc.data(), 0, nullptr))
        << img.message;
}

void write_jpeg(const std::string& path, int h, int w, int c, const Bytes& hwc) {
    fs::create_directories(fs::path(path).parent_path());
    FILE* f = std::fopen(path.c_str(), "wb");
    ASSERT_NE(f, nullptr);
    jpeg_compress_struct cinfo;
    jpeg_error_mgr jerr;
    cinfo.err = jpeg_std_error(&jerr);
    jpeg_create_compress(&cinfo);
    jpeg_stdio_dest(&cinfo, f);
    cinfo.image_width = w;
    cinfo.image_height = h;
    cinfo.input_components = c;
    cinfo.in_color_space = c == 3 ? JCS_RGB : JCS_GRAYSCALE;
    jpeg_set_defaults(&cinfo);
    jpeg_set_quality(&cinfo, 100, TRUE);
    for (int k = 0; k < cinfo.num_components; ++k) // 4:4:4, no chroma subsampling
        cinfo.comp_info[k].h_samp_factor = cinfo.comp_info[k].v_samp_factor = 1;
    jpeg_start_compress(&cinfo, TRUE);
    while (cinfo.next_scanline < cinfo.image_height) {
        JSAMPROW row = const_cast<uint8_t*>(hwc.data()) + size_t(cinfo.next_scanline) * w * c;
        jpeg_write_scanlines(&cinfo, &row, 1);
    }
    jpeg_finish_compress(&cinfo);
    jpeg_destroy_compress(&cinfo);
    std::fclose(f);
}

/// Pixel (k, y, x) of a u8 [N, C, H, W] dataset.
int px(const Array& a, int64_t n, int64_t c, int64_t y, int64_t x) {
    const Shape& s = a.shape();
    return a.data<uint8_t>()[((n * s[1] + c) * s[2] + y) * s[3] + x];
}

uint32_t rd_be32(const Bytes& b, size_t p) {
    return uint32_t(b[p]) << 24 | uint32_t(b[p + 1]) << 16 | uint32_t(b[p + 2]) << 8 | b[p + 3];
}

/// Offset of the first PNG chunk of the given type.
size_t png_chunk(const Bytes& b, const char* type) {
    size_t pos = 8;
    while (pos + 8 <= b.size()) {
        if (std::memcmp(b.data() + pos + 4, type, 4) == 0) return pos;
        pos += 12 + rd_be32(b, pos);
    }
    return 0;
}

} // namespace

// ---- IDX ----------------------------------------------------------------------------------

TEST(DataIdx, ReadsRawU8) {
    TempDir t;
    Bytes data = iota_bytes(3 * 2 * 4);
    write_bytes(t / "a.idx", idx_file(0x08, {3, 2, 4}, data));
    Array a = read_idx(t / "a.idx");
    EXPECT_EQ(a.dtype(), DType::U8);
    EXPECT_EQ(a.shape(), (Shape{3, 2, 4}));
    EXPECT_EQ(a.to_vector<uint8_t>(), data);
}

TEST(DataIdx, ReadsGzipAndEveryElementType) {
    TempDir t;
    // i16: -2, 300 ; i32: -70000, 5 ; f32: 1.5, -0.25 ; f64: 3.25 ; i8: -1, 7
    Bytes i16 = {0xff, 0xfe, 0x01, 0x2c};
    Bytes i32 = {0xff, 0xfe, 0xee, 0x90, 0, 0, 0, 5};
    Bytes f32 = {0x3f, 0xc0, 0, 0, 0xbe, 0x80, 0, 0};
    Bytes f64 = {0x40, 0x0a, 0, 0, 0, 0, 0, 0};
    Bytes i8 = {0xff, 0x07};
    struct Case {
        uint8_t type;
        std::vector<uint32_t> dims;
        Bytes data;
        DType dtype;
        std::vector<double> values;
    };
    std::vector<Case> cases = {{0x0B, {2}, i16, DType::I32, {-2, 300}},
                               {0x0C, {1, 2}, i32, DType::I32, {-70000, 5}},
                               {0x0D, {2}, f32, DType::F32, {1.5, -0.25}},
                               {0x0E, {1}, f64, DType::F64, {3.25}},
                               {0x09, {2}, i8, DType::I32, {-1, 7}}};
    for (const Case& c : cases) {
        Bytes file = idx_file(c.type, c.dims, c.data);
        write_bytes(t / "raw.idx", file);
        write_bytes(t / "z.idx.gz", gzip(file));
        for (const char* name : {"raw.idx", "z.idx.gz"}) {
            Array a = read_idx(t / name);
            EXPECT_EQ(a.dtype(), c.dtype) << name;
            EXPECT_EQ(a.to_vector<double>(), c.values) << name << " type " << int(c.type);
        }
    }
}

TEST(DataIdx, ReadsConcatenatedGzipMembers) {
    TempDir t;
    Bytes file = idx_file(0x08, {2, 100}, iota_bytes(200));
    Bytes first(file.begin(), file.begin() + 50), second(file.begin() + 50, file.end());
    Bytes z = gzip(first), z2 = gzip(second);
    z.insert(z.end(), z2.begin(), z2.end());
    write_bytes(t / "m.gz", z);
    EXPECT_EQ(read_idx(t / "m.gz").to_vector<uint8_t>(), iota_bytes(200));
    // members split inside the header, data over many decoding steps, zero padding at the end
    Bytes big = idx_file(0x08, {3, 100000}, iota_bytes(300000));
    Bytes a(big.begin(), big.begin() + 6), b(big.begin() + 6, big.begin() + 200000),
        c(big.begin() + 200000, big.end());
    Bytes zb = gzip(a);
    for (const Bytes* part : {&b, &c}) {
        Bytes zp = gzip(*part);
        zb.insert(zb.end(), zp.begin(), zp.end());
    }
    zb.resize(zb.size() + 512, 0);
    write_bytes(t / "big.gz", zb);
    EXPECT_EQ(read_idx(t / "big.gz").to_vector<uint8_t>(), iota_bytes(300000));
}

// A 2 MiB file that inflates to 2 GiB, behind a header that declares 4 data bytes: the reader
// stops one byte past the declared data, so it neither inflates the gigabytes (memory, time) nor
// reaches the stream's missing end (which would make the message "truncated gzip stream").
TEST(DataIdx, GzipBombStopsAtTheDeclaredSize) {
    TempDir t;
    const Bytes head = idx_file(0x08, {4}, {1, 2, 3, 4}); // 8 header bytes, 4 data bytes
    const Bytes bomb = gzip_bomb(head, 2048);
    ASSERT_LT(bomb.size(), size_t(4) << 20);
    write_bytes(t / "bomb.idx.gz", bomb);
    const auto t0 = std::chrono::steady_clock::now();
    std::string msg = io_error([&] { read_idx(t / "bomb.idx.gz"); });
    const double secs =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    EXPECT_CONTAINS(msg, t / "bomb.idx.gz");
    EXPECT_CONTAINS(msg, "byte 12 of the decompressed data:");
    EXPECT_CONTAINS(msg, "more data than the header declares");
    EXPECT_CONTAINS(msg, "dims [4]");
    // where decoding stopped: within the first piece of 1 MiB, not at the end of the file
    const size_t at = msg.find("compressed byte ");
    ASSERT_NE(at, std::string::npos) << msg;
    EXPECT_LT(std::stoull(msg.substr(at + 16)), 64u * 1024) << msg;
    // decoding 2 GiB takes seconds; the bounded read a few milliseconds (generous for a busy CI)
    EXPECT_LT(secs, 1.0);

    // The same rule for an honest stream with a few bytes too many: one byte past is enough.
    Bytes extra = head;
    extra.resize(extra.size() + 100, 9);
    write_bytes(t / "extra.idx.gz", gzip(extra));
    msg = io_error([&] { read_idx(t / "extra.idx.gz"); });
    EXPECT_CONTAINS(msg, "byte 12 of the decompressed data:");
    EXPECT_CONTAINS(msg, "more data than the header declares");
}

TEST(DataIdx, RejectsMalformedFiles) {
    TempDir t;
    const Bytes good = idx_file(0x08, {4, 5}, iota_bytes(20));
    struct Case {
        std::string name;
        Bytes bytes;
        std::vector<std::string> expect;
    };
    Bytes bad_magic = good;
    bad_magic[0] = 0x12;
    Bytes bad_type = good;
    bad_type[2] = 0x0A;
    Bytes zero_rank = {0, 0, 8, 0};
    Bytes short_dims(good.begin(), good.begin() + 9);
    Bytes short_data(good.begin(), good.end() - 3);
    Bytes trailing = good;
    trailing.push_back(1);
    std::vector<Case> cases = {
        {"magic.idx", bad_magic, {"byte 0:", "bad magic"}},
        {"type.idx", bad_type, {"byte 2:", "unknown element type code 0x0a"}},
        {"rank.idx", zero_rank, {"byte 3:", "rank 0"}},
        {"tiny.idx", {0, 0}, {"byte 2:", "truncated header"}},
        {"dims.idx", short_dims, {"byte 9:", "truncated header"}},
        {"data.idx", short_data, {"byte 29:", "truncated data", "need 20 bytes", "only 17"}},
        {"trail.idx", trailing, {"byte 32:", "1 unexpected bytes"}},
        {"gzdata.idx.gz", gzip(short_data), {"byte 29 of the decompressed data", "truncated"}},
    };
    for (const Case& c : cases) {
        write_bytes(t / c.name, c.bytes);
        std::string msg = io_error([&] { read_idx(t / c.name); });
        EXPECT_CONTAINS(msg, t / c.name);
        for (const auto& e : c.expect) EXPECT_CONTAINS(msg, e);
    }
}

TEST(DataIdx, RejectsCorruptAndTruncatedGzip) {
    TempDir t;
    Bytes z = gzip(idx_file(0x08, {64, 64}, iota_bytes(64 * 64)));
    Bytes cut(z.begin(), z.begin() + static_cast<long>(z.size() / 2));
    write_bytes(t / "cut.gz", cut);
    std::string msg = io_error([&] { read_idx(t / "cut.gz"); });
    EXPECT_CONTAINS(msg, t / "cut.gz");
    EXPECT_CONTAINS(msg, "truncated gzip stream");
    EXPECT_CONTAINS(msg, "byte " + std::to_string(cut.size()) + ":");

    Bytes bad = z;
    bad[z.size() - 6] ^= 0xff; // the stored CRC-32 (or the end of the data): the check fails
    write_bytes(t / "crc.gz", bad);
    msg = io_error([&] { read_idx(t / "crc.gz"); });
    EXPECT_CONTAINS(msg, t / "crc.gz");
    EXPECT_CONTAINS(msg, "corrupt gzip stream");
    EXPECT_CONTAINS(msg, "byte ");

    Bytes garbage = z;
    for (size_t i = 12; i < 40; ++i) garbage[i] = 0xff; // invalid deflate block codes
    write_bytes(t / "garbage.gz", garbage);
    msg = io_error([&] { read_idx(t / "garbage.gz"); });
    EXPECT_CONTAINS(msg, "corrupt gzip stream");

    Bytes tail = z;
    tail.push_back('x');
    write_bytes(t / "tail.gz", tail);
    msg = io_error([&] { read_idx(t / "tail.gz"); });
    EXPECT_CONTAINS(msg, "byte " + std::to_string(z.size()) + ":");
    EXPECT_CONTAINS(msg, "after the end of the gzip stream");

    msg = io_error([&] { read_idx(t / "missing.idx"); });
    EXPECT_CONTAINS(msg, t / "missing.idx");
    EXPECT_CONTAINS(msg, "cannot open");
}

TEST(DataIdx, LoadMnistLikePairsImagesAndLabels) {
    TempDir t;
    Bytes pixels = iota_bytes(5 * 3 * 2);
    write_bytes(t / "mn/train-images-idx3-ubyte.gz", gzip(idx_file(0x08, {5, 3, 2}, pixels)));
    write_bytes(t / "mn/train-labels-idx1-ubyte", idx_file(0x08, {5}, {4, 0, 2, 4, 1}));
    Dataset ds = load_mnist_like(t / "mn", true);
    EXPECT_EQ(ds.images.shape(), (Shape{5, 1, 3, 2}));
    EXPECT_EQ(ds.images.to_vector<uint8_t>(), pixels);
    EXPECT_EQ(ds.labels.dtype(), DType::I32);
    EXPECT_EQ(ds.labels.to_vector<int>(), (std::vector<int>{4, 0, 2, 4, 1}));
    EXPECT_EQ(ds.classes, (std::vector<std::string>{"0", "1", "2", "3", "4"}));
    EXPECT_EQ(ds.size(), 5);

    // A label outside the named classes: the offset is the label's byte.
    std::string msg = io_error([&] { load_mnist_like(t / "mn", true, {"a", "b", "c"}); });
    EXPECT_CONTAINS(msg, "train-labels-idx1-ubyte: byte 8:");
    EXPECT_CONTAINS(msg, "label 4 out of range for 3 classes");

    write_bytes(t / "mn/t10k-images-idx3-ubyte", idx_file(0x08, {2, 3, 2}, iota_bytes(12)));
    write_bytes(t / "mn/t10k-labels-idx1-ubyte", idx_file(0x08, {3}, {1, 1, 1}));
    msg = io_error([&] { load_mnist_like(t / "mn", false); });
    EXPECT_CONTAINS(msg, "3 labels for 2 images");

    msg = io_error([&] { load_mnist_like(t / "nothing", true); });
    EXPECT_CONTAINS(msg, "no train-images-idx3-ubyte");
}

TEST(DataIdx, RealFashionMnistTestSet) {
    const std::string dir = "/usr/share/datasets/fashion-mnist";
    if (!fs::exists(dir + "/t10k-images-idx3-ubyte.gz")) {
        // Without Debian's dataset-fashion-mnist the reader must say what is missing.
        std::string msg = io_error([&] { load_mnist_like(dir, false); });
        EXPECT_CONTAINS(msg, "no t10k-images-idx3-ubyte");
        return;
    }
    Dataset ds = load_mnist_like(dir, false, fashion_mnist_classes());
    ASSERT_EQ(ds.images.shape(), (Shape{10000, 1, 28, 28}));
    ASSERT_EQ(ds.labels.shape(), (Shape{10000}));
    std::vector<int> count(10, 0);
    for (int v : ds.labels.to_vector<int>()) {
        ASSERT_GE(v, 0);
        ASSERT_LE(v, 9);
        ++count[v];
    }
    EXPECT_EQ(count, std::vector<int>(10, 1000)); // the test set is balanced
    EXPECT_EQ(ds.classes.size(), 10u);
    EXPECT_GT(*std::max_element(ds.images.data<uint8_t>(), ds.images.data<uint8_t>() + 784), 0);
}

// ---- CIFAR-10 binary ----------------------------------------------------------------------

TEST(DataCifar, ReadsRecordsAcrossFiles) {
    TempDir t;
    auto record = [](uint8_t label, int seed) {
        Bytes r = {label};
        Bytes p = iota_bytes(3072, seed);
        r.insert(r.end(), p.begin(), p.end());
        return r;
    };
    Bytes a = record(3, 0), a2 = record(9, 1), b = record(0, 2);
    a.insert(a.end(), a2.begin(), a2.end());
    write_bytes(t / "data_batch_1.bin", a);
    write_bytes(t / "data_batch_2.bin", b);
    Dataset ds = read_cifar10_binary({t / "data_batch_1.bin", t / "data_batch_2.bin"});
    EXPECT_EQ(ds.images.shape(), (Shape{3, 3, 32, 32}));
    EXPECT_EQ(ds.labels.to_vector<int>(), (std::vector<int>{3, 9, 0}));
    EXPECT_EQ(ds.classes, cifar10_classes());
    EXPECT_EQ(ds.classes[3], "cat");
    // record 1: R plane first, then G, then B, each row-major
    Bytes p1 = iota_bytes(3072, 1);
    EXPECT_EQ(px(ds.images, 1, 0, 0, 0), p1[0]);
    EXPECT_EQ(px(ds.images, 1, 1, 2, 5), p1[1024 + 2 * 32 + 5]);
    EXPECT_EQ(px(ds.images, 2, 2, 31, 31), iota_bytes(3072, 2)[3071]);
}

TEST(DataCifar, RejectsMalformedFiles) {
    TempDir t;
    Bytes two(2 * 3073, 1);
    Bytes cut(two.begin(), two.end() - 10);
    write_bytes(t / "cut.bin", cut);
    std::string msg = io_error([&] { read_cifar10_binary({t / "cut.bin"}); });
    EXPECT_CONTAINS(msg, t / "cut.bin");
    EXPECT_CONTAINS(msg, "byte 3073:");
    EXPECT_CONTAINS(msg, "truncated record");

    Bytes bad = two;
    bad[3073] = 10;
    write_bytes(t / "label.bin", bad);
    msg = io_error([&] { read_cifar10_binary({t / "label.bin"}); });
    EXPECT_CONTAINS(msg, t / "label.bin");
    EXPECT_CONTAINS(msg, "byte 3073:");
    EXPECT_CONTAINS(msg, "label 10");

    write_bytes(t / "empty.bin", {});
    msg = io_error([&] { read_cifar10_binary({t / "empty.bin"}); });
    EXPECT_CONTAINS(msg, "empty file");
}

// ---- images -------------------------------------------------------------------------------

TEST(DataImage, PngFolderExactPixels) {
    TempDir t;
    write_png(t / "root/dog/b.png", 4, 5, 3, pattern(4, 5, 3, 2));
    write_png(t / "root/cat/z.png", 4, 5, 3, pattern(4, 5, 3, 1));
    write_png(t / "root/cat/a.PNG", 4, 5, 3, pattern(4, 5, 3, 0));
    write_bytes(t / "root/cat/notes.txt", {'h', 'i'}); // ignored
    write_bytes(t / "root/.hidden/x.png", {0});         // ignored
    Dataset ds = read_image_folder(t / "root", 0, 2);
    EXPECT_EQ(ds.classes, (std::vector<std::string>{"cat", "dog"}));
    EXPECT_EQ(ds.images.shape(), (Shape{3, 3, 4, 5}));
    EXPECT_EQ(ds.labels.to_vector<int>(), (std::vector<int>{0, 0, 1}));
    for (int n = 0; n < 3; ++n) {
        const int seed = n; // a.PNG, z.png, b.png
        Bytes p = pattern(4, 5, 3, seed);
        for (int c = 0; c < 3; ++c)
            for (int y = 0; y < 4; ++y)
                for (int x = 0; x < 5; ++x)
                    ASSERT_EQ(px(ds.images, n, c, y, x), p[(y * 5 + x) * 3 + c])
                        << n << " " << c << " " << y << " " << x;
    }
    Array one = read_image(t / "root/dog/b.png");
    EXPECT_EQ(one.shape(), (Shape{3, 4, 5}));
    Array gray = read_image(t / "root/dog/b.png", 1);
    EXPECT_EQ(gray.shape(), (Shape{1, 4, 5}));
}

TEST(DataImage, GrayscaleAndMixedChannels) {
    TempDir t;
    write_png(t / "g/a/1.png", 3, 3, 1, pattern(3, 3, 1, 4));
    write_png(t / "g/b/1.png", 3, 3, 1, pattern(3, 3, 1, 5));
    Dataset ds = read_image_folder(t / "g");
    EXPECT_EQ(ds.images.shape(), (Shape{2, 1, 3, 3}));
    EXPECT_EQ(px(ds.images, 1, 0, 2, 1), pattern(3, 3, 1, 5)[2 * 3 + 1]);

    // The first image (RGB) fixes C = 3; a gray image is replicated into the three channels.
    write_png(t / "m/a/1.png", 3, 3, 3, pattern(3, 3, 3, 1));
    write_png(t / "m/b/1.png", 3, 3, 1, pattern(3, 3, 1, 6));
    write_png(t / "m/b/2.png", 3, 3, 4, pattern(3, 3, 4, 7)); // RGBA: alpha dropped
    Dataset m = read_image_folder(t / "m");
    EXPECT_EQ(m.images.shape(), (Shape{3, 3, 3, 3}));
    for (int c = 0; c < 3; ++c) EXPECT_EQ(px(m.images, 1, c, 1, 2), pattern(3, 3, 1, 6)[5]);
    Dataset forced = read_image_folder(t / "g", 3);
    EXPECT_EQ(forced.images.shape(), (Shape{2, 3, 3, 3}));
}

TEST(DataImage, JpegFolderCloseToSource) {
    TempDir t;
    write_jpeg(t / "j/x/0.jpg", 8, 8, 3, smooth(8, 8, 3, 0));
    write_jpeg(t / "j/y/1.jpeg", 8, 8, 3, smooth(8, 8, 3, 1));
    write_png(t / "j/y/2.png", 8, 8, 3, smooth(8, 8, 3, 2)); // PNG and JPEG may mix
    Dataset ds = read_image_folder(t / "j");
    ASSERT_EQ(ds.images.shape(), (Shape{3, 3, 8, 8}));
    EXPECT_EQ(ds.labels.to_vector<int>(), (std::vector<int>{0, 1, 1}));
    int worst = 0;
    for (int n = 0; n < 3; ++n) {
        Bytes p = smooth(8, 8, 3, n);
        for (int c = 0; c < 3; ++c)
            for (int y = 0; y < 8; ++y)
                for (int x = 0; x < 8; ++x)
                    worst = std::max(worst, std::abs(px(ds.images, n, c, y, x) -
                                                     p[(y * 8 + x) * 3 + c]));
    }
    EXPECT_LE(worst, 4); // quality 100, no subsampling
    write_jpeg(t / "jg/a/0.jpg", 6, 7, 1, smooth(6, 7, 1, 3));
    Array g = read_image(t / "jg/a/0.jpg");
    EXPECT_EQ(g.shape(), (Shape{1, 6, 7}));
    EXPECT_NEAR(g.data<uint8_t>()[0], smooth(6, 7, 1, 3)[0], 3);
}

TEST(DataImage, RejectsDifferentSizesAndBadFolders) {
    TempDir t;
    write_png(t / "s/a/1.png", 4, 4, 3, pattern(4, 4, 3, 0));
    write_png(t / "s/b/1.png", 4, 6, 3, pattern(4, 6, 3, 0));
    std::string msg = io_error([&] { read_image_folder(t / "s"); });
    EXPECT_CONTAINS(msg, t / "s/b/1.png");
    EXPECT_CONTAINS(msg, "byte 16:");
    EXPECT_CONTAINS(msg, "image is 6x4, expected 4x4");

    write_jpeg(t / "sj/a/1.jpg", 8, 8, 1, smooth(8, 8, 1, 0));
    write_jpeg(t / "sj/b/1.jpg", 9, 8, 1, smooth(9, 8, 1, 0));
    msg = io_error([&] { read_image_folder(t / "sj"); });
    EXPECT_CONTAINS(msg, t / "sj/b/1.jpg");
    EXPECT_CONTAINS(msg, "image is 8x9, expected 8x8");

    fs::create_directories(t / "e/empty");
    write_png(t / "e/full/1.png", 2, 2, 1, pattern(2, 2, 1, 0));
    msg = io_error([&] { read_image_folder(t / "e"); });
    EXPECT_CONTAINS(msg, "empty");
    EXPECT_CONTAINS(msg, "class folder without");

    msg = io_error([&] { read_image_folder(t / "nowhere"); });
    EXPECT_CONTAINS(msg, "not a directory");
    EXPECT_CONTAINS(msg, "tar xzf");
}

TEST(DataImage, RejectsCorruptPng) {
    TempDir t;
    write_png(t / "ok.png", 6, 6, 3, pattern(6, 6, 3, 0));
    const Bytes good = read_bytes(t / "ok.png");
    const size_t idat = png_chunk(good, "IDAT");
    ASSERT_GT(idat, 0u);

    Bytes cut(good.begin(), good.begin() + static_cast<long>(idat + 10));
    write_bytes(t / "cut.png", cut);
    std::string msg = io_error([&] { read_image(t / "cut.png"); });
    EXPECT_CONTAINS(msg, t / "cut.png");
    EXPECT_CONTAINS(msg, "byte " + std::to_string(idat) + ":");
    EXPECT_CONTAINS(msg, "truncated PNG IDAT chunk");

    Bytes flipped = good;
    flipped[idat + 9] ^= 0x55;
    write_bytes(t / "crc.png", flipped);
    msg = io_error([&] { read_image(t / "crc.png"); });
    EXPECT_CONTAINS(msg, "byte " + std::to_string(idat) + ":");
    EXPECT_CONTAINS(msg, "CRC mismatch in the PNG IDAT chunk");

    // Damaged compressed data behind a valid CRC: libpng itself rejects it.
    Bytes inner = good;
    const uint32_t len = rd_be32(good, idat);
    for (uint32_t i = 2; i < len; ++i) inner[idat + 8 + i] = 0xff;
    uint32_t crc = static_cast<uint32_t>(crc32(0, inner.data() + idat + 4, len + 4));
    for (int k = 0; k < 4; ++k)
        inner[idat + 8 + len + k] = static_cast<uint8_t>(crc >> (24 - 8 * k));
    write_bytes(t / "zlib.png", inner);
    msg = io_error([&] { read_image(t / "zlib.png"); });
    EXPECT_CONTAINS(msg, t / "zlib.png");
    EXPECT_CONTAINS(msg, "byte " + std::to_string(idat) + ":");
    EXPECT_CONTAINS(msg, "undecodable PNG image data");

    write_bytes(t / "text.png", {'h', 'e', 'l', 'l', 'o'});
    msg = io_error([&] { read_image(t / "text.png"); });
    EXPECT_CONTAINS(msg, "byte 0:");
    EXPECT_CONTAINS(msg, "bad magic");
}

TEST(DataImage, RejectsCorruptJpeg) {
    TempDir t;
    write_jpeg(t / "ok.jpg", 16, 16, 3, smooth(16, 16, 3, 0));
    const Bytes good = read_bytes(t / "ok.jpg");
    for (size_t keep : {good.size() * 6 / 10, size_t(30)}) {
        Bytes cut(good.begin(), good.begin() + static_cast<long>(keep));
        write_bytes(t / "cut.jpg", cut);
        std::string msg = io_error([&] { read_image(t / "cut.jpg"); });
        EXPECT_CONTAINS(msg, t / "cut.jpg");
        EXPECT_CONTAINS(msg, "undecodable JPEG");
        EXPECT_CONTAINS(msg, "byte ");
    }
    // Garbage in the headers: libjpeg's error_exit must not end the process.
    Bytes bad = good;
    for (size_t i = 4; i < 40; ++i) bad[i] = 0xff;
    write_bytes(t / "bad.jpg", bad);
    std::string msg = io_error([&] { read_image(t / "bad.jpg"); });
    EXPECT_CONTAINS(msg, "undecodable JPEG");
}

TEST(DataImage, FirstBadImageIsReportedWhateverTheThreads) {
    TempDir t;
    for (int i = 0; i < 12; ++i) {
        char name[32];
        std::snprintf(name, sizeof name, "f/a/%02d.png", i);
        write_png(t / name, 3, 3, 1, pattern(3, 3, 1, i));
        if (i == 4 || i == 9) write_bytes(t / name, {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a});
    }
    for (int threads : {1, 2, 5}) {
        std::string msg = io_error([&] { read_image_folder(t / "f", 0, threads); });
        EXPECT_CONTAINS(msg, t / "f/a/04.png");
    }
}

TEST(DataImage, ImageListWithMetadataJson) {
    TempDir t;
    for (int i = 0; i < 3; ++i) {
        char name[32];
        std::snprintf(name, sizeof name, "test_images/%05d.png", i);
        write_png(t / name, 4, 4, 3, pattern(4, 4, 3, i));
    }
    // Listed out of file-name order: the array's order is the dataset's order.
    const std::string meta = R"({"classes": ["airplane", "automobile", "bird"],
        "images": [{"id": 0, "image_path": "test_images/00002.png", "label_id": 2},
                   {"id": 1, "image_path": "test_images/00000.png", "label_id": 0, "x": 1},
                   {"id": 2, "image_path": "test_images/00001.png", "label_id": 1}]})";
    write_bytes(t / "metadata.json", Bytes(meta.begin(), meta.end()));
    Dataset ds = read_image_list(t.path.string());
    EXPECT_EQ(ds.images.shape(), (Shape{3, 3, 4, 4}));
    EXPECT_EQ(ds.labels.to_vector<int>(), (std::vector<int>{2, 0, 1}));
    EXPECT_EQ(ds.classes[1], "automobile");
    EXPECT_EQ(px(ds.images, 0, 1, 2, 3), pattern(4, 4, 3, 2)[(2 * 4 + 3) * 3 + 1]);

    const std::string broken = R"({"images": [{"image_path": "a.png", "label_id": 1,]})";
    write_bytes(t / "broken.json", Bytes(broken.begin(), broken.end()));
    std::string msg = io_error([&] { read_image_list(t.path.string(), "broken.json"); });
    EXPECT_CONTAINS(msg, t / "broken.json");
    EXPECT_CONTAINS(msg, "byte 50:");
    EXPECT_CONTAINS(msg, "invalid JSON");

    const std::string range = R"({"classes": ["a"], "images": [
        {"image_path": "test_images/00000.png", "label_id": 1}]})";
    write_bytes(t / "range.json", Bytes(range.begin(), range.end()));
    msg = io_error([&] { read_image_list(t.path.string(), "range.json"); });
    EXPECT_CONTAINS(msg, "images[0]: label_id 1 out of range for 1 classes");

    const std::string missing = R"({"images": [{"image_path": "nope.png", "label_id": 0}]})";
    write_bytes(t / "missing.json", Bytes(missing.begin(), missing.end()));
    msg = io_error([&] { read_image_list(t.path.string(), "missing.json"); });
    EXPECT_CONTAINS(msg, t / "nope.png");
}

// ---- Dataset and Loader -------------------------------------------------------------------

namespace {

/// N samples of C x H x W whose pixels encode the sample index; labels = index % 10.
Dataset synthetic(int64_t n, int64_t c = 1, int64_t h = 4, int64_t w = 4) {
    Dataset ds;
    ds.images = Array(DType::U8, {n, c, h, w});
    ds.labels = Array(DType::I32, {n});
    auto* p = ds.images.data<uint8_t>();
    for (int64_t i = 0; i < ds.images.size(); ++i)
        p[i] = static_cast<uint8_t>((i * 37 + i / 7) % 251);
    for (int64_t i = 0; i < n; ++i) ds.labels.data<int32_t>()[i] = static_cast<int32_t>(i % 10);
    for (int k = 0; k < 10; ++k) ds.classes.push_back("c" + std::to_string(k));
    return ds;
}

struct EpochRecord {
    std::vector<std::vector<int64_t>> indices;
    std::vector<Array> xs, ys;
};

EpochRecord run_epoch(Loader& l, int64_t e) {
    EpochRecord r;
    for (auto& b : l.epoch(e)) {
        r.indices.push_back(b.indices);
        r.xs.push_back(b.x);
        r.ys.push_back(b.y);
    }
    return r;
}

bool same(const EpochRecord& a, const EpochRecord& b) {
    if (a.indices != b.indices || a.xs.size() != b.xs.size()) return false;
    for (size_t i = 0; i < a.xs.size(); ++i)
        if (!a.xs[i].equals(b.xs[i]) || !a.ys[i].equals(b.ys[i])) return false;
    return true;
}

} // namespace

TEST(DataLoader, EverySampleExactlyOncePerEpoch) {
    Dataset ds = synthetic(50);
    LoaderOptions o;
    o.batch_size = 7;
    o.seed = 3;
    o.workers = 2;
    Loader l(ds, o);
    EXPECT_EQ(l.batches_per_epoch(), 8);
    EXPECT_EQ(l.samples_per_epoch(), 50);
    for (int64_t e = 0; e < 3; ++e) {
        std::vector<int64_t> seen;
        Epoch ep = l.epoch(e);
        EXPECT_EQ(ep.size(), 8);
        int64_t k = 0;
        for (auto& b : ep) {
            EXPECT_EQ(b.index, k++);
            EXPECT_EQ(b.epoch, e);
            EXPECT_EQ(ep.consumed(), k);
            EXPECT_EQ(b.x.dtype(), DType::F32);
            EXPECT_EQ(b.x.shape(), (Shape{int64_t(b.indices.size()), 1, 4, 4}));
            EXPECT_EQ(b.y.shape(), (Shape{int64_t(b.indices.size())}));
            for (size_t i = 0; i < b.indices.size(); ++i)
                EXPECT_EQ(b.y.data<int32_t>()[i], b.indices[i] % 10);
            seen.insert(seen.end(), b.indices.begin(), b.indices.end());
        }
        EXPECT_EQ(k, 8);
        EXPECT_EQ(seen.size(), 50u);
        EXPECT_EQ(seen, l.order(e));
        std::sort(seen.begin(), seen.end());
        for (int64_t i = 0; i < 50; ++i) EXPECT_EQ(seen[i], i);
    }
}

TEST(DataLoader, DropLastAndNextApi) {
    Loader l(synthetic(50), {.batch_size = 7, .drop_last = true, .seed = 1, .workers = 0});
    EXPECT_EQ(l.batches_per_epoch(), 7);
    EXPECT_EQ(l.samples_per_epoch(), 49);
    Epoch ep = l.epoch(0);
    std::set<int64_t> seen;
    int n = 0;
    while (auto b = ep.next()) {
        EXPECT_EQ(b->indices.size(), 7u);
        seen.insert(b->indices.begin(), b->indices.end());
        ++n;
    }
    EXPECT_EQ(n, 7);
    EXPECT_EQ(seen.size(), 49u);
    EXPECT_FALSE(ep.next().has_value());

    Loader keep(synthetic(50), {.batch_size = 7, .shuffle = false});
    Epoch all = keep.epoch(0);
    std::vector<size_t> sizes;
    for (auto& b : all) sizes.push_back(b.indices.size());
    EXPECT_EQ(sizes, (std::vector<size_t>{7, 7, 7, 7, 7, 7, 7, 1}));
}

TEST(DataLoader, SeededOrderAndAugmentationAreReproducible) {
    Dataset ds = synthetic(40, 3, 6, 6);
    LoaderOptions o;
    o.batch_size = 8;
    o.seed = 11;
    o.augment = {.crop_padding = 2, .horizontal_flip = true};
    o.mean = {0.5f, 0.4f, 0.3f};
    o.std = {0.2f, 0.25f, 0.3f};
    o.workers = 1;
    Loader a(ds, o);
    o.workers = 3; // more workers and a different queue bound give the same batches
    o.prefetch = 1;
    Loader b(ds, o);
    o.workers = 0;
    Loader c(ds, o);
    EpochRecord a0 = run_epoch(a, 0), a1 = run_epoch(a, 1);
    EXPECT_TRUE(same(a0, run_epoch(b, 0)));
    EXPECT_TRUE(same(a0, run_epoch(c, 0)));
    EXPECT_TRUE(same(a0, run_epoch(a, 0)));
    EXPECT_NE(a0.indices, a1.indices); // a new order each epoch
    EXPECT_TRUE(same(a1, run_epoch(b, 1)));
    o.seed = 12;
    Loader d(ds, o);
    EXPECT_NE(a0.indices, run_epoch(d, 0).indices);
    // The order is shuffled_order(n, seed + epoch), documented as such.
    EXPECT_EQ(a.order(5), shuffled_order(40, 11, 5));
    EXPECT_EQ(shuffled_order(40, 11, 5), shuffled_order(40, 16, 0));
    EXPECT_NE(shuffled_order(40, 11, 5), shuffled_order(40, 11, 6));
}

// A sharded loader builds exactly its rank's rows of each global batch: what nn::shard_batch
// keeps of the unsharded loader's batch, bit for bit, augmentation included.
TEST(DataLoader, ShardsAreTheRowsShardBatchWouldKeep) {
    Dataset ds = synthetic(44, 3, 6, 6); // 5 batches of 8 and a last of 4: every batch splits
    LoaderOptions o;
    o.batch_size = 8;
    o.seed = 5;
    o.augment = {.crop_padding = 2, .horizontal_flip = true};
    o.mean = {0.5f};
    o.std = {0.25f};
    Loader whole(ds, o);
    for (int rank = 0; rank < 2; ++rank) {
        o.shard_rank = rank;
        o.shard_count = 2;
        Loader part(ds, o);
        EXPECT_EQ(part.batches_per_epoch(), whole.batches_per_epoch());
        for (int64_t e : {0, 1}) {
            Epoch all = whole.epoch(e), mine = part.epoch(e);
            int64_t n = 0;
            while (auto g = all.next()) {
                auto b = mine.next();
                ASSERT_TRUE(b.has_value()) << "rank " << rank << " ran out at batch " << n;
                Batch want = nn::shard_batch(*g, rank, 2);
                ASSERT_EQ(b->x.shape(), want.x.shape());
                EXPECT_EQ(0, std::memcmp(b->x.raw(), want.x.raw(), size_t(want.x.nbytes())))
                    << "rank " << rank << ", epoch " << e << ", batch " << n;
                EXPECT_EQ(b->y.to_vector<int32_t>(), want.y.to_vector<int32_t>());
                EXPECT_EQ(b->indices, want.indices);
                ++n;
            }
            EXPECT_FALSE(mine.next().has_value());
            EXPECT_EQ(n, 6);
        }
    }
    // shares that are not equal are refused when the loader is made
    o.shard_rank = 0;
    o.shard_count = 3;
    EXPECT_THROW(Loader(ds, o), InputError); // 8 does not split into 3
    o.shard_count = 2;
    Dataset odd = synthetic(45, 3, 6, 6); // a last batch of 5
    EXPECT_THROW(Loader(odd, o), InputError);
    o.drop_last = true;
    EXPECT_NO_THROW(Loader(odd, o));
    o.shard_rank = 2;
    EXPECT_THROW(Loader(odd, o), InputError);
}

TEST(DataLoader, NormalisationValues) {
    Dataset ds;
    ds.images = Array(std::vector<uint8_t>{0, 255, 51, 102, 0, 255, 204, 153}, {1, 2, 2, 2});
    ds.labels = Array(std::vector<int32_t>{7});
    ds.classes = {"x"};
    Loader l(ds, {.batch_size = 1, .shuffle = false, .mean = {0.5f, 0.25f}, .std = {0.5f, 2.0f}});
    auto b = l.epoch(0).next();
    ASSERT_TRUE(b.has_value());
    std::vector<float> x = b->x.to_vector<float>();
    const std::vector<float> want = {-1.f, 1.f, -0.6f, -0.2f, -0.125f, 0.375f, 0.275f, 0.175f};
    ASSERT_EQ(x.size(), want.size());
    for (size_t i = 0; i < x.size(); ++i) EXPECT_NEAR(x[i], want[i], 1e-6) << i;
    EXPECT_EQ(b->y.to_vector<int>(), (std::vector<int>{7}));

    Loader plain(ds, {.batch_size = 1, .shuffle = false}); // only scaled to [0, 1]
    std::vector<float> p = plain.epoch(0).next()->x.to_vector<float>();
    EXPECT_FLOAT_EQ(p[1], 1.f);
    EXPECT_FLOAT_EQ(p[2], 0.2f);
    EXPECT_FLOAT_EQ(p[7], 0.6f);
}

TEST(DataLoader, CropAndFlipAreShiftsAndMirrors) {
    const int64_t h = 5, w = 6, pad = 2;
    Dataset ds = synthetic(64, 2, h, w);
    Loader l(ds, {.batch_size = 16, .seed = 5, .augment = {.crop_padding = pad,
                                                            .horizontal_flip = true}});
    int flips = 0, shifted = 0, total = 0;
    for (auto& b : l.epoch(2)) {
        const float* x = b.x.data<float>();
        for (size_t k = 0; k < b.indices.size(); ++k, ++total) {
            const int64_t n = b.indices[k];
            bool found = false;
            // The output must equal some crop (dy, dx) of the zero-padded image, maybe mirrored.
            for (int f = 0; f < 2 && !found; ++f)
                for (int64_t dy = 0; dy <= 2 * pad && !found; ++dy)
                    for (int64_t dx = 0; dx <= 2 * pad && !found; ++dx) {
                        bool ok = true;
                        for (int64_t c = 0; c < 2 && ok; ++c)
                            for (int64_t y = 0; y < h && ok; ++y)
                                for (int64_t xx = 0; xx < w && ok; ++xx) {
                                    int64_t sy = y + dy - pad;
                                    int64_t sx = (f ? w - 1 - xx : xx) + dx - pad;
                                    float v = sy >= 0 && sy < h && sx >= 0 && sx < w
                                                  ? px(ds.images, n, c, sy, sx) / 255.f
                                                  : 0.f;
                                    ok = x[((k * 2 + c) * h + y) * w + xx] == v;
                                }
                        if (ok) {
                            found = true;
                            flips += f;
                            shifted += (dy != pad || dx != pad);
                        }
                    }
            EXPECT_TRUE(found) << "sample " << n;
        }
    }
    EXPECT_EQ(total, 64);
    EXPECT_GT(flips, 10); // about half are mirrored (fixed seed: deterministic counts)
    EXPECT_LT(flips, 54);
    EXPECT_GT(shifted, 40); // 24 of 25 offsets move the image
}

TEST(DataLoader, WorkerExceptionIsRethrownToTheConsumer) {
    for (int workers : {0, 1, 3}) {
        LoaderOptions o;
        o.batch_size = 4;
        o.workers = workers;
        o.transform = [](Batch& b) {
            if (b.index == 2) throw std::runtime_error("augment failed on batch 2");
        };
        Loader l(synthetic(20), o);
        Epoch ep = l.epoch(0);
        EXPECT_EQ(ep.next()->index, 0);
        EXPECT_EQ(ep.next()->index, 1);
        try {
            ep.next();
            ADD_FAILURE() << "no exception with " << workers << " workers";
        } catch (const std::runtime_error& e) {
            EXPECT_STREQ(e.what(), "augment failed on batch 2");
        }
        EXPECT_EQ(ep.next()->index, 3); // the epoch goes on after the failed batch
    }
}

TEST(DataLoader, BoundedQueueAndEarlyExit) {
    std::atomic<int> built{0};
    LoaderOptions o;
    o.batch_size = 2;
    o.workers = 2;
    o.prefetch = 3;
    o.transform = [&](Batch&) { ++built; };
    Loader l(synthetic(200), o);
    {
        Epoch ep = l.epoch(0);
        ASSERT_TRUE(ep.next().has_value());
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        EXPECT_LE(built.load(), 1 + 3); // the consumed batch + the queue bound
        EXPECT_GE(built.load(), 2);     // but the workers did prefetch
    } // leaving mid-epoch joins the workers
    for (auto& b : l.epoch(1)) {
        if (b.index == 5) break;
    }
    Epoch moved = l.epoch(2);
    Epoch target = std::move(moved);
    EXPECT_EQ(target.next()->epoch, 2);
}

TEST(DataLoader, RejectsBadOptions) {
    Dataset ds = synthetic(10, 3, 2, 2);
    EXPECT_THROW((Loader(ds, {.batch_size = 0})), InputError);
    EXPECT_THROW((Loader(ds, {.mean = {0.1f, 0.2f}})), InputError);
    EXPECT_THROW((Loader(ds, {.std = {1.f, 0.f, 1.f}})), InputError);
    EXPECT_THROW((Loader(ds, {.batch_size = 11, .drop_last = true})), InputError);
    EXPECT_THROW((Loader(ds, {.prefetch = 0})), InputError);
    Dataset bad = ds;
    bad.labels = Array(DType::I32, {9});
    EXPECT_THROW((Loader(bad, {})), InputError);
    // [N, H, W] images are taken as one channel
    Dataset flat = ds;
    flat.images = Array(DType::U8, {10, 4, 3});
    Loader l(flat, {.batch_size = 10});
    EXPECT_EQ(l.epoch(0).next()->x.shape(), (Shape{10, 1, 4, 3}));
}

TEST(DataLoader, DatasetSliceAndTake) {
    Dataset ds = synthetic(10, 1, 2, 2);
    Dataset s = ds.slice(2, 5);
    EXPECT_EQ(s.size(), 3);
    EXPECT_EQ(s.labels.to_vector<int>(), (std::vector<int>{2, 3, 4}));
    EXPECT_EQ(px(s.images, 1, 0, 1, 1), px(ds.images, 3, 0, 1, 1));
    Dataset t = ds.take({9, 0});
    EXPECT_EQ(t.labels.to_vector<int>(), (std::vector<int>{9, 0}));
    EXPECT_EQ(px(t.images, 0, 0, 0, 1), px(ds.images, 9, 0, 0, 1));
    EXPECT_EQ(t.classes, ds.classes);
    EXPECT_THROW(ds.slice(4, 11), InputError);
    EXPECT_THROW(ds.take({10}), InputError);
}
