// Private helpers of the dataset readers: whole-file reads and gzip decoding.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

struct z_stream_s;

namespace sj::data::detail {

/// The bytes of a file; IOError naming the file when it cannot be opened or read.
std::vector<uint8_t> read_file(const std::string& path);

/// True when `bytes` starts with the gzip magic 1f 8b.
bool is_gzip(const std::vector<uint8_t>& bytes);

/// Decodes a gzip stream (several members are concatenated; zero padding after the last one is
/// allowed) a piece at a time, so that a reader decodes only as much as the file's own header
/// promises: a small file that inflates to gigabytes (a gzip bomb) is never decoded past that.
/// IOError naming `path` and the compressed byte offset on a corrupt or truncated stream.
class GzipReader {
public:
    /// `bytes` must outlive the reader.
    GzipReader(const std::vector<uint8_t>& bytes, std::string path);
    ~GzipReader();
    GzipReader(const GzipReader&) = delete;
    GzipReader& operator=(const GzipReader&) = delete;

    /// Decodes until `out` holds `size` bytes or the stream ends (`out` keeps what it held and
    /// grows geometrically, so a `size` that the data does not back allocates nothing).
    /// Returns whether `out` holds `size` bytes.
    bool read_to(std::vector<uint8_t>& out, size_t size);
    /// The offset in the compressed bytes that decoding has reached (for messages).
    uint64_t compressed_offset() const { return pos_ + consumed_; }

private:
    void start_member();
    void end_member();

    struct InflateEnd {
        void operator()(z_stream_s* zs) const;
    };
    const std::vector<uint8_t>& bytes_;
    std::string path_;
    std::unique_ptr<z_stream_s, InflateEnd> zs_; // the member being decoded (null between)
    uint64_t pos_ = 0;                           // where the current member starts
    uint64_t consumed_ = 0; // compressed bytes of the current member decoded so far
    bool done_ = false;     // the last member has ended
};

} // namespace sj::data::detail
