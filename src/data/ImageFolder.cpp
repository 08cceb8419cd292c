// PNG/JPEG decoding (libpng, libjpeg) and the image-folder and JSON image-list dataset readers.
#include "data/DataIO.h"

#include <symjax/Data.h>
#include <symjax/Threads.h>

#include <jpeglib.h>
#include <nlohmann/json.hpp>
#include <png.h>
#include <zlib.h>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <csetjmp>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <mutex>
#include <thread>

namespace sj::data {

namespace {

namespace fs = std::filesystem;

/// A decoded image, interleaved (HWC).
struct Decoded {
    int64_t height = 0, width = 0;
    int channels = 0;
    std::vector<uint8_t> hwc;
    /// Where the header gives the size (for messages about a size mismatch).
    uint64_t size_offset = 0;
};

uint32_t be32(const uint8_t* p) {
    return uint32_t(p[0]) << 24 | uint32_t(p[1]) << 16 | uint32_t(p[2]) << 8 | p[3];
}

std::string at(const std::string& path, uint64_t off) {
    return path + ": byte " + std::to_string(off) + ": ";
}

/// Larger decoded images are refused (a damaged header must not make us allocate gigabytes).
constexpr uint64_t kMaxImageBytes = uint64_t(1) << 30;

// ---- PNG ----------------------------------------------------------------------------------

constexpr uint8_t kPngSig[8] = {0x89, 'P', 'N', 'G', 0x0d, 0x0a, 0x1a, 0x0a};

/// Walks the chunk list (lengths, CRCs, IHDR first, IEND last) so that a damaged file is reported
/// at the byte where it goes wrong; libpng's own messages carry no offset. Returns the offset of
/// the first IDAT chunk.
uint64_t check_png_chunks(const std::vector<uint8_t>& b, const std::string& path) {
    const uint64_t n = b.size();
    uint64_t pos = 8, first_idat = 0;
    for (int k = 0;; ++k) {
        SJ_CHECK(n - pos >= 8, IOError) << at(path, pos) << "truncated PNG: the file ends before "
                                        << "the IEND chunk (" << n - pos << " bytes left)";
        const uint64_t len = be32(b.data() + pos);
        const std::string type(reinterpret_cast<const char*>(b.data() + pos + 4), 4);
        SJ_CHECK(len < (uint64_t(1) << 31), IOError)
            << at(path, pos) << "PNG chunk length " << len << " is too large";
        SJ_CHECK(k > 0 || type == "IHDR", IOError)
            << at(path, pos) << "the first PNG chunk is '" << type << "', expected IHDR";
        SJ_CHECK(n - pos - 8 >= len + 4, IOError)
            << at(path, pos) << "truncated PNG " << type << " chunk: it needs " << len + 12
            << " bytes, the file has " << n - pos << " left";
        const uint32_t crc = static_cast<uint32_t>(
            crc32(crc32(0L, Z_NULL, 0), b.data() + pos + 4, static_cast<uInt>(len + 4)));
        SJ_CHECK(crc == be32(b.data() + pos + 8 + len), IOError)
            << at(path, pos) << "CRC mismatch in the PNG " << type << " chunk (corrupt data)";
        if (type == "IDAT" && !first_idat) first_idat = pos;
        if (type == "IEND") return first_idat;
        pos += 12 + len;
    }
}

Decoded decode_png(const std::vector<uint8_t>& b, const std::string& path, int want) {
    const uint64_t idat = check_png_chunks(b, path);
    SJ_CHECK(idat > 0, IOError) << at(path, 8) << "PNG has no IDAT (image data) chunk";
    png_image img;
    std::memset(&img, 0, sizeof img);
    img.version = PNG_IMAGE_VERSION;
    SJ_CHECK(png_image_begin_read_from_memory(&img, b.data(), b.size()), IOError)
        << at(path, 8) << "undecodable PNG header (" << img.message << ")";
    if (uint64_t(img.width) * img.height * 3 > kMaxImageBytes) {
        png_image_free(&img);
        SJ_THROW(IOError) << at(path, 16) << "PNG image of " << img.width << "x" << img.height
                          << " is too large";
    }
    Decoded d;
    d.width = img.width;
    d.height = img.height;
    d.size_offset = 16; // IHDR data
    const int native = (img.format & PNG_FORMAT_FLAG_COLOR) ? 3 : 1;
    d.channels = want ? want : native;
    img.format = d.channels == 3 ? PNG_FORMAT_RGB : PNG_FORMAT_GRAY;
    d.hwc.assign(PNG_IMAGE_SIZE(img), 0); // alpha composites onto this black background
    int ok = png_image_finish_read(&img, nullptr, d.hwc.data(), 0, nullptr);
    std::string msg = img.message;
    png_image_free(&img);
    SJ_CHECK(ok, IOError) << at(path, idat) << "undecodable PNG image data (" << msg << ")";
    return d;
}

// ---- JPEG ---------------------------------------------------------------------------------

struct JpegErr {
    jpeg_error_mgr pub;
    std::jmp_buf jump;
    char msg[JMSG_LENGTH_MAX];
};

void jpeg_on_error(j_common_ptr c) {
    auto* e = reinterpret_cast<JpegErr*>(c->err);
    c->err->format_message(c, e->msg);
    std::longjmp(e->jump, 1);
}

/// Warnings (level -1) mean corrupt data that libjpeg would paper over (e.g. a truncated file
/// filled with grey): we reject those images, and stop at once rather than decode the rest.
void jpeg_on_message(j_common_ptr c, int level) {
    if (level < 0) jpeg_on_error(c);
}

struct JpegRaw {
    unsigned char* pixels; // malloc'ed HWC
    int width, height, channels;
    unsigned long fail_offset;
    char msg[JMSG_LENGTH_MAX];
};

/// The libjpeg calls, C style: libjpeg reports errors with longjmp, which must not cross frames
/// that own C++ objects, so nothing here has a destructor. Returns false on failure.
bool decode_jpeg_raw(const unsigned char* data, unsigned long size, int want, JpegRaw* out) {
    jpeg_decompress_struct cinfo;
    JpegErr jerr;
    std::memset(&cinfo, 0, sizeof cinfo);
    unsigned char* volatile pixels = nullptr;
    cinfo.err = jpeg_std_error(&jerr.pub);
    jerr.pub.error_exit = jpeg_on_error;
    jerr.pub.emit_message = jpeg_on_message;
    jerr.msg[0] = 0;
    out->pixels = nullptr;
    if (setjmp(jerr.jump)) {
        out->fail_offset = cinfo.src ? size - cinfo.src->bytes_in_buffer : 0;
        std::snprintf(out->msg, sizeof out->msg, "%s", jerr.msg);
        jpeg_destroy_decompress(&cinfo);
        std::free(pixels);
        return false;
    }
    jpeg_create_decompress(&cinfo);
    jpeg_mem_src(&cinfo, data, size);
    jpeg_read_header(&cinfo, TRUE);
    const int native = cinfo.num_components == 1 ? 1 : 3;
    const int c = want ? want : native;
    cinfo.out_color_space = c == 1 ? JCS_GRAYSCALE : JCS_RGB;
    if (uint64_t(cinfo.image_width) * cinfo.image_height * c > kMaxImageBytes) {
        std::snprintf(out->msg, sizeof out->msg, "image of %ux%u is too large",
                      cinfo.image_width, cinfo.image_height);
        out->fail_offset = 0;
        jpeg_destroy_decompress(&cinfo);
        return false;
    }
    jpeg_start_decompress(&cinfo);
    const size_t row = size_t(cinfo.output_width) * c;
    pixels = static_cast<unsigned char*>(std::malloc(row * cinfo.output_height + 1));
    if (!pixels) {
        std::snprintf(out->msg, sizeof out->msg, "out of memory");
        out->fail_offset = 0;
        jpeg_destroy_decompress(&cinfo);
        return false;
    }
    while (cinfo.output_scanline < cinfo.output_height) {
        JSAMPROW r = pixels + row * cinfo.output_scanline;
        jpeg_read_scanlines(&cinfo, &r, 1);
    }
    jpeg_finish_decompress(&cinfo);
    out->width = static_cast<int>(cinfo.output_width);
    out->height = static_cast<int>(cinfo.output_height);
    out->channels = c;
    jpeg_destroy_decompress(&cinfo);
    out->pixels = pixels;
    return true;
}

/// Offset of the SOFn segment's height field (for messages), or 2 when not found.
uint64_t jpeg_sof_offset(const std::vector<uint8_t>& b) {
    size_t pos = 2;
    while (pos + 4 <= b.size() && b[pos] == 0xff) {
        uint8_t m = b[pos + 1];
        if (m >= 0xc0 && m <= 0xcf && m != 0xc4 && m != 0xc8 && m != 0xcc) return pos + 5;
        pos += 2 + (size_t(b[pos + 2]) << 8 | b[pos + 3]);
    }
    return 2;
}

Decoded decode_jpeg(const std::vector<uint8_t>& b, const std::string& path, int want) {
    JpegRaw raw;
    bool ok = decode_jpeg_raw(b.data(), b.size(), want, &raw);
    SJ_CHECK(ok, IOError) << at(path, raw.fail_offset) << "undecodable JPEG (" << raw.msg << ")";
    Decoded d;
    d.width = raw.width;
    d.height = raw.height;
    d.channels = raw.channels;
    d.hwc.assign(raw.pixels, raw.pixels + size_t(raw.width) * raw.height * raw.channels);
    std::free(raw.pixels);
    d.size_offset = jpeg_sof_offset(b);
    return d;
}

// ---- common -------------------------------------------------------------------------------

Decoded decode_file(const std::string& path, int want) {
    SJ_CHECK(want == 0 || want == 1 || want == 3, InputError)
        << "read_image: channels must be 0 (as stored), 1 or 3, got " << want;
    std::vector<uint8_t> b = detail::read_file(path);
    if (b.size() >= 8 && std::memcmp(b.data(), kPngSig, 8) == 0) return decode_png(b, path, want);
    if (b.size() >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff)
        return decode_jpeg(b, path, want);
    SJ_THROW(IOError) << at(path, 0) << "bad magic: neither a PNG (89 50 4e 47 ...) nor a JPEG "
                      << "(ff d8 ff) file (" << b.size() << " bytes)";
}

void hwc_to_chw(const Decoded& d, uint8_t* dst) {
    const int64_t plane = d.height * d.width;
    for (int64_t i = 0; i < plane; ++i)
        for (int c = 0; c < d.channels; ++c) dst[c * plane + i] = d.hwc[i * d.channels + c];
}

struct Item {
    std::string path;
    int32_t label;
};

/// Decodes every item into u8 [N, C, H, W] on `threads` threads. The first item fixes C (unless
/// `channels` does), H and W. On failure rethrows the error of the lowest-numbered bad item, so
/// the message does not depend on thread timing.
Array decode_all(const std::vector<Item>& items, int channels, int threads) {
    Decoded first = decode_file(items[0].path, channels);
    const int c = first.channels;
    const int64_t n = static_cast<int64_t>(items.size()), h = first.height, w = first.width;
    Array images(DType::U8, {n, c, h, w});
    uint8_t* out = images.data<uint8_t>();
    hwc_to_chw(first, out);

    std::atomic<int64_t> next{1};
    std::mutex mu;
    int64_t bad = n;
    std::exception_ptr err;
    auto work = [&] {
        for (int64_t i = next++; i < n; i = next++) {
            try {
                Decoded d = decode_file(items[i].path, c);
                SJ_CHECK(d.height == h && d.width == w, IOError)
                    << at(items[i].path, d.size_offset) << "image is " << d.width << "x"
                    << d.height << ", expected " << w << "x" << h << " like " << items[0].path
                    << " (all images must have the same size)";
                hwc_to_chw(d, out + i * c * h * w);
            } catch (...) {
                std::lock_guard<std::mutex> lock(mu);
                if (i < bad) bad = i, err = std::current_exception();
            }
        }
    };
    if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
    threads = static_cast<int>(std::min<int64_t>({threads, n, max_threads()}));
    std::vector<std::thread> pool;
    for (int t = 1; t < threads; ++t) pool.emplace_back(work);
    work();
    for (auto& t : pool) t.join();
    if (err) std::rethrow_exception(err);
    return images;
}

bool is_image_name(const fs::path& p) {
    std::string e = p.extension().string();
    std::transform(e.begin(), e.end(), e.begin(),
                   [](unsigned char ch) { return static_cast<char>(std::tolower(ch)); });
    return e == ".png" || e == ".jpg" || e == ".jpeg";
}

bool hidden(const fs::path& p) { return p.filename().string().starts_with("."); }

} // namespace

Array read_image(const std::string& path, int channels) {
    Decoded d = decode_file(path, channels);
    Array a(DType::U8, {d.channels, d.height, d.width});
    hwc_to_chw(d, a.data<uint8_t>());
    return a;
}

Dataset read_image_folder(const std::string& root, int channels, int threads) {
    std::error_code ec;
    SJ_CHECK(fs::is_directory(root, ec), IOError)
        << root << ": not a directory (expected root/<class>/<image> folders; extract an archive "
        << "first with `tar xzf file.tar.gz -C dir`)";
    Dataset ds;
    std::vector<fs::path> dirs;
    for (const auto& e : fs::directory_iterator(root, ec))
        if (e.is_directory() && !hidden(e.path())) dirs.push_back(e.path());
    SJ_CHECK(!ec, IOError) << root << ": cannot list the folder (" << ec.message() << ")";
    std::sort(dirs.begin(), dirs.end());
    SJ_CHECK(!dirs.empty(), IOError) << root << ": no class subfolders";
    std::vector<Item> items;
    for (size_t k = 0; k < dirs.size(); ++k) {
        std::vector<fs::path> files;
        for (const auto& e : fs::directory_iterator(dirs[k], ec))
            if (e.is_regular_file() && !hidden(e.path()) && is_image_name(e.path()))
                files.push_back(e.path());
        SJ_CHECK(!ec, IOError) << dirs[k].string() << ": cannot list the folder ("
                               << ec.message() << ")";
        SJ_CHECK(!files.empty(), IOError)
            << dirs[k].string() << ": class folder without .png/.jpg/.jpeg images";
        std::sort(files.begin(), files.end());
        for (const auto& f : files) items.push_back({f.string(), static_cast<int32_t>(k)});
        ds.classes.push_back(dirs[k].filename().string());
    }
    ds.images = decode_all(items, channels, threads);
    ds.labels = Array(DType::I32, {static_cast<int64_t>(items.size())});
    auto* y = ds.labels.data<int32_t>();
    for (size_t i = 0; i < items.size(); ++i) y[i] = items[i].label;
    return ds;
}

Dataset read_image_list(const std::string& root, const std::string& metadata, int channels,
                        int threads) {
    using nlohmann::json;
    const std::string mpath = (fs::path(root) / metadata).string();
    std::vector<uint8_t> bytes = detail::read_file(mpath);
    json j;
    try {
        j = json::parse(bytes.begin(), bytes.end());
    } catch (const json::parse_error& e) {
        SJ_THROW(IOError) << at(mpath, e.byte ? e.byte - 1 : 0) << "invalid JSON (" << e.what()
                          << ")";
    }
    SJ_CHECK(j.is_object() && j.contains("images") && j["images"].is_array(), IOError)
        << mpath << ": expected an object with an \"images\" array";
    Dataset ds;
    if (j.contains("classes")) {
        SJ_CHECK(j["classes"].is_array(), IOError) << mpath << ": \"classes\" is not an array";
        for (const auto& c : j["classes"]) {
            SJ_CHECK(c.is_string(), IOError) << mpath << ": \"classes\" holds a non-string";
            ds.classes.push_back(c.get<std::string>());
        }
    }
    const json& list = j["images"];
    SJ_CHECK(!list.empty(), IOError) << mpath << ": the \"images\" array is empty";
    std::vector<Item> items;
    int32_t max_label = -1;
    for (size_t i = 0; i < list.size(); ++i) {
        const json& e = list[i];
        SJ_CHECK(e.is_object() && e.contains("image_path") && e["image_path"].is_string(), IOError)
            << mpath << ": images[" << i << "] has no string \"image_path\"";
        SJ_CHECK(e.contains("label_id") && e["label_id"].is_number_integer(), IOError)
            << mpath << ": images[" << i << "] has no integer \"label_id\"";
        const int64_t label = e["label_id"].get<int64_t>();
        const int64_t limit = ds.classes.empty() ? (int64_t(1) << 31) - 1 : ds.classes.size();
        SJ_CHECK(label >= 0 && label < limit, IOError)
            << mpath << ": images[" << i << "]: label_id " << label << " out of range for "
            << ds.classes.size() << " classes";
        items.push_back({(fs::path(root) / e["image_path"].get<std::string>()).string(),
                         static_cast<int32_t>(label)});
        max_label = std::max<int32_t>(max_label, static_cast<int32_t>(label));
    }
    if (ds.classes.empty())
        for (int32_t c = 0; c <= max_label; ++c) ds.classes.push_back(std::to_string(c));
    ds.images = decode_all(items, channels, threads);
    ds.labels = Array(DType::I32, {static_cast<int64_t>(items.size())});
    auto* y = ds.labels.data<int32_t>();
    for (size_t i = 0; i < items.size(); ++i) y[i] = items[i].label;
    return ds;
}

} // namespace sj::data
