// Private helpers of the dataset readers: whole-file reads and gzip decoding.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace sj::data::detail {

/// The bytes of a file; IOError naming the file when it cannot be opened or read.
std::vector<uint8_t> read_file(const std::string& path);

/// True when `bytes` starts with the gzip magic 1f 8b.
bool is_gzip(const std::vector<uint8_t>& bytes);

/// Decompresses a gzip stream (several members are concatenated); IOError naming `path` and the
/// compressed byte offset on a corrupt or truncated stream.
std::vector<uint8_t> gunzip(const std::vector<uint8_t>& bytes, const std::string& path);

} // namespace sj::data::detail
