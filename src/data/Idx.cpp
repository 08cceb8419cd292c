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

void GzipReader::InflateEnd::operator()(z_stream_s* zs) const {
    inflateEnd(zs);
    delete zs;
}

GzipReader::GzipReader(const std::vector<uint8_t>& bytes, std::string path)
    : bytes_(bytes), path_(std::move(path)) {}

GzipReader::~GzipReader() = default;

void GzipReader::start_member() {
    auto zs = std::make_unique<z_stream>();
    int rc = inflateInit2(zs.get(), 16 + MAX_WBITS);
    SJ_CHECK(rc == Z_OK, IOError) << path_ << ": cannot start the gzip decoder (zlib error " << rc
                                  << ")";
    zs_.reset(zs.release());
    consumed_ = 0;
}

void GzipReader::end_member() {
    zs_.reset();
    pos_ += consumed_;
    consumed_ = 0;
    const size_t n = bytes_.size();
    if (pos_ == n) {
        done_ = true;
        return;
    }
    if (n - pos_ >= 2 && bytes_[pos_] == 0x1f && bytes_[pos_ + 1] == 0x8b)
        return; // next member
    // Zero padding after the last member (as tape archives leave) is harmless.
    done_ = std::all_of(bytes_.begin() + static_cast<std::ptrdiff_t>(pos_), bytes_.end(),
                        [](uint8_t b) { return !b; });
    SJ_CHECK(done_, IOError) << path_ << ": byte " << pos_ << ": " << n - pos_
                             << " unexpected bytes after the end of the gzip stream";
}

bool GzipReader::read_to(std::vector<uint8_t>& out, size_t size) {
    constexpr size_t kChunk = size_t(1) << 30; // z_stream counts are 32-bit
    while (out.size() < size && !done_) {
        if (!zs_) start_member();
        size_t used = out.size();
        // Grow geometrically: `size` comes from the file and is only trusted as data arrives.
        out.resize(std::min(size, std::max<size_t>(used * 2, used + (size_t(1) << 16))));
        const size_t room = std::min(out.size() - used, kChunk);
        const size_t in_left = std::min<size_t>(bytes_.size() - pos_ - consumed_, kChunk);
        zs_->next_in = const_cast<Bytef*>(bytes_.data() + pos_ + consumed_);
        zs_->avail_in = static_cast<uInt>(in_left);
        zs_->next_out = out.data() + used;
        zs_->avail_out = static_cast<uInt>(room);
        int rc = inflate(zs_.get(), Z_NO_FLUSH);
        used += room - zs_->avail_out;
        consumed_ += in_left - zs_->avail_in;
        out.resize(used);
        if (rc == Z_STREAM_END) {
            end_member();
            continue;
        }
        if (rc == Z_OK) continue;
        SJ_CHECK(rc != Z_BUF_ERROR, IOError)
            << path_ << ": byte " << compressed_offset() << ": truncated gzip stream (the "
            << "compressed data ends before the end of the stream; " << used << " bytes decoded)";
        SJ_CHECK(rc != Z_MEM_ERROR, IOError) << path_ << ": out of memory decoding gzip data";
        SJ_THROW(IOError) << path_ << ": byte " << compressed_offset() << ": corrupt gzip stream ("
                          << (zs_->msg ? zs_->msg : "zlib error " + std::to_string(rc)) << ")";
    }
    return out.size() >= size;
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

/// What an IDX header declares.
struct IdxHeader {
    uint8_t type = 0; // the element type code
    int esize = 0;    // bytes per element in the file
    DType dtype = DType::U8;
    Shape shape;
    uint64_t count = 0;      // elements
    uint64_t data_begin = 0; // header bytes
    uint64_t data_bytes = 0; // count * esize
};

/// The largest header: magic, type, rank 16 and 16 dims.
constexpr uint64_t kMaxIdxHeader = 4 + 4 * 16;

/// Parses the header at the start of `b`, which holds the whole file or at least its first
/// kMaxIdxHeader bytes.
IdxHeader parse_idx_header(const std::vector<uint8_t>& b, const std::string& path, bool gz) {
    const uint64_t n = b.size();
    SJ_CHECK(n >= 4, IOError) << at(path, n, gz) << "truncated header: the IDX magic needs 4 "
                              << "bytes, the file has " << n;
    SJ_CHECK(b[0] == 0 && b[1] == 0, IOError)
        << at(path, 0, gz) << "bad magic " << hex_byte(b[0]) << " " << hex_byte(b[1])
        << " (an IDX file starts with two zero bytes, a type code and the rank)";
    IdxHeader h;
    h.type = b[2];
    switch (h.type) {
    case 0x08: h.esize = 1, h.dtype = DType::U8; break;
    case 0x09: h.esize = 1, h.dtype = DType::I32; break;
    case 0x0B: h.esize = 2, h.dtype = DType::I32; break;
    case 0x0C: h.esize = 4, h.dtype = DType::I32; break;
    case 0x0D: h.esize = 4, h.dtype = DType::F32; break;
    case 0x0E: h.esize = 8, h.dtype = DType::F64; break;
    }
    SJ_CHECK(h.esize > 0, IOError)
        << at(path, 2, gz) << "unknown element type code " << hex_byte(b[2])
        << " (expected 0x08, 0x09, 0x0b, 0x0c, 0x0d or 0x0e)";
    const int rank = b[3];
    SJ_CHECK(rank >= 1 && rank <= 16, IOError)
        << at(path, 3, gz) << "rank " << rank << " is not in 1..16";
    h.data_begin = 4 + 4 * uint64_t(rank);
    SJ_CHECK(n >= h.data_begin, IOError)
        << at(path, n, gz) << "truncated header: " << rank << " dims need bytes 4.." << h.data_begin
        << ", the file has " << n;
    h.count = 1;
    for (int i = 0; i < rank; ++i) {
        uint64_t d = be32(b.data() + 4 + 4 * i);
        SJ_CHECK(d == 0 || h.count <= (uint64_t(1) << 62) / d / uint64_t(h.esize), IOError)
            << at(path, 4 + 4 * i, gz) << "dims too large (" << d << " at dim " << i << ")";
        h.count *= d;
        h.shape.push_back(static_cast<int64_t>(d));
    }
    h.data_bytes = h.count * uint64_t(h.esize);
    return h;
}

Array read_idx_impl(const std::string& path, bool* gz_out) {
    std::vector<uint8_t> raw = detail::read_file(path);
    const bool gz = detail::is_gzip(raw);
    if (gz_out) *gz_out = gz;
    std::vector<uint8_t> b;
    IdxHeader h;
    if (gz) {
        // Decode the header, then only the data it declares and one byte more (to tell a stream
        // that goes on from one that ends there): a gzip bomb stops at that byte.
        detail::GzipReader z(raw, path);
        z.read_to(b, kMaxIdxHeader);
        h = parse_idx_header(b, path, gz);
        const uint64_t end = h.data_begin + h.data_bytes;
        SJ_CHECK(!z.read_to(b, static_cast<size_t>(end) + 1), IOError)
            << at(path, end, gz) << "the gzip stream holds more data than the header declares ("
            << "dims " << shape_str(h.shape) << " of " << h.esize
            << "-byte elements: " << h.data_bytes << " bytes from byte " << h.data_begin
            << "); decoding stopped at compressed byte " << z.compressed_offset() << " of "
            << raw.size();
    } else {
        b = std::move(raw);
        h = parse_idx_header(b, path, gz);
    }
    const uint64_t n = b.size(), header = h.data_begin, need = h.data_bytes;
    SJ_CHECK(n - header >= need, IOError)
        << at(path, n, gz) << "truncated data: dims " << shape_str(h.shape) << " need " << need
        << " bytes from byte " << header << ", only " << n - header << " present";
    SJ_CHECK(n - header == need, IOError)
        << at(path, header + need, gz) << n - header - need
        << " unexpected bytes after the data (dims " << shape_str(h.shape) << ")";

    Array out(h.dtype, h.shape);
    const uint8_t* src = b.data() + header;
    const auto m = static_cast<int64_t>(h.count);
    switch (h.type) {
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
