// IDX reader (MNIST, Fashion-MNIST), raw or gzipped, plus the file and gzip helpers of src/data.
#include "data/DataIO.h"

#include <symjax/Data.h>

#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>

namespace sj::data {

namespace detail {

std::vector<uint8_t> read_file(const std::string& path) {
    std::error_code ec;
    SJ_CHECK(!std::filesystem::is_directory(path, ec), IOError)
        << path << ": is a directory, expected a file";
    std::ifstream f(path, std::ios::binary | std::ios::ate);
    SJ_CHECK(f.is_open(), IOError) << path << ": cannot open for reading (" << std::strerror(errno)
                                   << ")";
    std::streamoff n = f.tellg();
    SJ_CHECK(n >= 0, IOError) << path << ": cannot determine the file size";
    std::vector<uint8_t> bytes(static_cast<size_t>(n));
    f.seekg(0);
    if (n > 0) f.read(reinterpret_cast<char*>(bytes.data()), n);
    SJ_CHECK(f.good() || (n == 0 && !f.bad()), IOError)
        << path << ": read error after " << f.gcount() << " of " << n << " bytes";
    return bytes;
}

bool is_gzip(const std::vector<uint8_t>& bytes) {
    return bytes.size() >= 2 && bytes[0] == 0x1f && bytes[1] == 0x8b;
}

namespace {
struct Inflater {
    z_stream zs{};
    bool live = false;
    ~Inflater() {
        if (live) inflateEnd(&zs);
    }
};
} // namespace

std::vector<uint8_t> gunzip(const std::vector<uint8_t>& bytes, const std::string& path) {
    constexpr size_t kChunk = size_t(1) << 30; // z_stream counts are 32-bit
    std::vector<uint8_t> out;
    // ISIZE (the last 4 bytes) is the uncompressed size mod 2^32: a good first guess, capped by
    // deflate's largest ratio (about 1032:1) so that a damaged trailer cannot reserve gigabytes.
    if (bytes.size() >= 18) {
        const uint8_t* t = bytes.data() + bytes.size() - 4;
        uint32_t isize = t[0] | t[1] << 8 | t[2] << 16 | uint32_t(t[3]) << 24;
        out.reserve(std::min<size_t>(isize, bytes.size() * 1032 + (1 << 16)));
    }
    size_t used = 0, pos = 0;
    while (true) {
        Inflater inf;
        int rc = inflateInit2(&inf.zs, 16 + MAX_WBITS);
        SJ_CHECK(rc == Z_OK, IOError) << path << ": cannot start the gzip decoder (zlib error "
                                      << rc << ")";
        inf.live = true;
        size_t consumed = 0;
        while (true) {
            if (used == out.size()) out.resize(std::max<size_t>(out.size() * 2, 1 << 16));
            size_t room = std::min(out.size() - used, kChunk);
            size_t in_left = std::min(bytes.size() - pos - consumed, kChunk);
            inf.zs.next_in = const_cast<Bytef*>(bytes.data() + pos + consumed);
            inf.zs.avail_in = static_cast<uInt>(in_left);
            inf.zs.next_out = out.data() + used;
            inf.zs.avail_out = static_cast<uInt>(room);
            rc = inflate(&inf.zs, Z_NO_FLUSH);
            used += room - inf.zs.avail_out;
            consumed += in_left - inf.zs.avail_in;
            if (rc == Z_STREAM_END) break;
            if (rc == Z_OK) continue;
            SJ_CHECK(rc != Z_BUF_ERROR, IOError)
                << path << ": byte " << pos + consumed << ": truncated gzip stream (the compressed "
                << "data ends before the end of the stream; " << used << " bytes decoded)";
            SJ_CHECK(rc != Z_MEM_ERROR, IOError) << path << ": out of memory decoding gzip data";
            SJ_THROW(IOError) << path << ": byte " << pos + consumed << ": corrupt gzip stream ("
                              << (inf.zs.msg ? inf.zs.msg : "zlib error " + std::to_string(rc))
                              << ")";
        }
        pos += consumed;
        if (pos == bytes.size()) break;
        if (bytes.size() - pos >= 2 && bytes[pos] == 0x1f && bytes[pos + 1] == 0x8b) continue;
        // Zero padding after the last member (as tape archives leave) is harmless.
        bool zeros = std::all_of(bytes.begin() + pos, bytes.end(), [](uint8_t b) { return !b; });
        SJ_CHECK(zeros, IOError) << path << ": byte " << pos << ": " << bytes.size() - pos
                                 << " unexpected bytes after the end of the gzip stream";
        break;
    }
    out.resize(used);
    out.shrink_to_fit();
    return out;
}

} // namespace detail

namespace {

/// "file: byte N: " or "file: byte N of the decompressed data: ".
std::string at(const std::string& path, uint64_t off, bool gz) {
    return path + ": byte " + std::to_string(off) + (gz ? " of the decompressed data" : "") + ": ";
}

uint32_t be32(const uint8_t* p) {
    return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
}

template <class T> T load_be(const uint8_t* p) {
    uint8_t tmp[sizeof(T)];
    for (size_t i = 0; i < sizeof(T); ++i) tmp[i] = p[sizeof(T) - 1 - i];
    T v;
    std::memcpy(&v, tmp, sizeof(T));
    return v;
}

/// Copies big-endian elements of type S into dst (element type D).
template <class S, class D> void convert_be(const uint8_t* src, int64_t n, D* dst) {
    for (int64_t i = 0; i < n; ++i) dst[i] = static_cast<D>(load_be<S>(src + i * sizeof(S)));
}

std::string hex_byte(uint8_t b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "0x%02x", b);
    return buf;
}

std::string find_idx(const std::string& dir, const std::string& prefix, const std::string& kind,
                     const std::string& idx) {
    namespace fs = std::filesystem;
    // The original MNIST names, and the "train-images.idx3-ubyte" variant some copies use.
    for (const std::string& name : {prefix + "-" + kind + "-" + idx + "-ubyte",
                                    prefix + "-" + kind + "." + idx + "-ubyte"})
        for (const char* ext : {".gz", ""}) {
            fs::path p = fs::path(dir) / (name + ext);
            std::error_code ec;
            if (fs::is_regular_file(p, ec)) return p.string();
        }
    SJ_THROW(IOError) << dir << ": no " << prefix << "-" << kind << "-" << idx
                      << "-ubyte[.gz] file (expected the MNIST file layout, e.g. "
                      << "train-images-idx3-ubyte.gz)";
}

Array read_idx_impl(const std::string& path, bool* gz_out) {
    std::vector<uint8_t> raw = detail::read_file(path);
    const bool gz = detail::is_gzip(raw);
    if (gz_out) *gz_out = gz;
    std::vector<uint8_t> b = gz ? detail::gunzip(raw, path) : std::move(raw);
    const uint64_t n = b.size();

    SJ_CHECK(n >= 4, IOError) << at(path, n, gz) << "truncated header: the IDX magic needs 4 "
                              << "bytes, the file has " << n;
    SJ_CHECK(b[0] == 0 && b[1] == 0, IOError)
        << at(path, 0, gz) << "bad magic " << hex_byte(b[0]) << " " << hex_byte(b[1])
        << " (an IDX file starts with two zero bytes, a type code and the rank)";
    int esize = 0;
    DType dtype = DType::U8;
    switch (b[2]) {
    case 0x08: esize = 1, dtype = DType::U8; break;
    case 0x09: esize = 1, dtype = DType::I32; break;
    case 0x0B: esize = 2, dtype = DType::I32; break;
    case 0x0C: esize = 4, dtype = DType::I32; break;
    case 0x0D: esize = 4, dtype = DType::F32; break;
    case 0x0E: esize = 8, dtype = DType::F64; break;
    }
    SJ_CHECK(esize > 0, IOError) << at(path, 2, gz) << "unknown element type code "
                                 << hex_byte(b[2])
                                 << " (expected 0x08, 0x09, 0x0b, 0x0c, 0x0d or 0x0e)";
    const int rank = b[3];
    SJ_CHECK(rank >= 1 && rank <= 16, IOError)
        << at(path, 3, gz) << "rank " << rank << " is not in 1..16";
    const uint64_t header = 4 + 4 * uint64_t(rank);
    SJ_CHECK(n >= header, IOError) << at(path, n, gz) << "truncated header: " << rank
                                   << " dims need bytes 4.." << header << ", the file has " << n;
    Shape shape;
    uint64_t count = 1;
    for (int i = 0; i < rank; ++i) {
        uint64_t d = be32(b.data() + 4 + 4 * i);
        SJ_CHECK(d == 0 || count <= (uint64_t(1) << 62) / d / uint64_t(esize), IOError)
            << at(path, 4 + 4 * i, gz) << "dims too large (" << d << " at dim " << i << ")";
        count *= d;
        shape.push_back(static_cast<int64_t>(d));
    }
    const uint64_t need = count * uint64_t(esize);
    SJ_CHECK(n - header >= need, IOError)
        << at(path, n, gz) << "truncated data: dims " << shape_str(shape) << " need " << need
        << " bytes from byte " << header << ", only " << n - header << " present";
    SJ_CHECK(n - header == need, IOError)
        << at(path, header + need, gz) << n - header - need
        << " unexpected bytes after the data (dims " << shape_str(shape) << ")";

    Array out(dtype, shape);
    const uint8_t* src = b.data() + header;
    const auto m = static_cast<int64_t>(count);
    switch (b[2]) {
    case 0x08: if (m) std::memcpy(out.raw(), src, static_cast<size_t>(m)); break;
    case 0x09: convert_be<int8_t>(src, m, out.data<int32_t>()); break;
    case 0x0B: convert_be<int16_t>(src, m, out.data<int32_t>()); break;
    case 0x0C: convert_be<int32_t>(src, m, out.data<int32_t>()); break;
    case 0x0D: convert_be<float>(src, m, out.data<float>()); break;
    case 0x0E: convert_be<double>(src, m, out.data<double>()); break;
    }
    return out;
}

} // namespace

Array read_idx(const std::string& path) { return read_idx_impl(path, nullptr); }

const std::vector<std::string>& fashion_mnist_classes() {
    static const std::vector<std::string> names = {"T-shirt/top", "Trouser", "Pullover", "Dress",
                                                   "Coat",        "Sandal",  "Shirt",    "Sneaker",
                                                   "Bag",         "Ankle boot"};
    return names;
}

Dataset load_mnist_like(const std::string& dir, bool train,
                        const std::vector<std::string>& classes) {
    const std::string prefix = train ? "train" : "t10k";
    const std::string ipath = find_idx(dir, prefix, "images", "idx3");
    const std::string lpath = find_idx(dir, prefix, "labels", "idx1");
    bool igz = false, lgz = false;
    Array images = read_idx_impl(ipath, &igz);
    Array labels = read_idx_impl(lpath, &lgz);
    SJ_CHECK(images.dtype() == DType::U8 && images.rank() == 3, IOError)
        << at(ipath, 2, igz) << "expected u8 images of rank 3 [N, H, W], the header says "
        << images.type_str();
    SJ_CHECK(labels.dtype() == DType::U8 && labels.rank() == 1, IOError)
        << at(lpath, 2, lgz) << "expected u8 labels of rank 1 [N], the header says "
        << labels.type_str();
    SJ_CHECK(images.shape()[0] == labels.shape()[0], IOError)
        << at(lpath, 4, lgz) << labels.shape()[0] << " labels for " << images.shape()[0]
        << " images in " << ipath;
    const int64_t n = labels.shape()[0];
    const uint8_t* l = labels.data<uint8_t>();
    Array y(DType::I32, {n});
    int32_t* yp = y.data<int32_t>();
    int max_label = -1;
    for (int64_t i = 0; i < n; ++i) {
        SJ_CHECK(classes.empty() || l[i] < classes.size(), IOError)
            << at(lpath, 8 + i, lgz) << "label " << int(l[i])
            << " out of range for " << classes.size() << " classes";
        yp[i] = l[i];
        max_label = std::max(max_label, int(l[i]));
    }
    Dataset ds;
    ds.images = images.reshape({n, 1, images.shape()[1], images.shape()[2]});
    ds.labels = y;
    ds.classes = classes;
    if (ds.classes.empty())
        for (int c = 0; c <= max_label; ++c) ds.classes.push_back(std::to_string(c));
    return ds;
}

} // namespace sj::data
