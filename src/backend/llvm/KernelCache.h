// The kernel cache's disk entries: where they live, their format, atomic writes and validated
// reads (KernelCache.cpp; docs/compiler.md, "Kernel cache"). The cpu backend keeps its objects
// in them and the cuda backend its PTX (docs/gpu.md).
#pragma once

#include <cstdint>
#include <string>

namespace sj::codegen {

/// The entries' version, in every entry's header (cpu objects and PTX alike) and in the cpu
/// keys; bumping it makes every entry a miss. 2: one entry per bundle of kernels; 3: row-order
/// kernels; 4: math library calls computed once per loop (Note [Math libraries] in
/// KernelExpr.cpp); 5: f32 sin, cos, tan, log2, atan2, pow and hypot inline (Note [Inline sin
/// and cos]).
inline constexpr uint32_t kCacheSchema = 5;

/// The disk cache directory in use: $SJ_CACHE_DIR, else $XDG_CACHE_HOME/symjax, else
/// ~/.cache/symjax ("" disables the disk cache: SJ_CACHE_DIR=off).
std::string cache_dir();

/// The 64-bit hash that names entries and kernels, and checks objects.
uint64_t cache_checksum(const std::string& s);
/// v as 16 lowercase hex digits.
std::string hex64(uint64_t v);

/// Reads a disk-cache entry: its object bytes, or "" when the entry is absent, not a regular
/// file, too large, of another key or schema, or damaged (a logged miss; *present says whether
/// something was there). Never throws. Exposed for the fuzz target (fuzz/fuzz_kernel_cache.cpp).
std::string read_cache_entry(const std::string& path, const std::string& key, bool* present);
/// The bytes of an entry holding `obj` for `key`: magic, schema, key, object size, checksum,
/// object.
std::string encode_cache_entry(const std::string& key, const std::string& obj);
/// Writes an entry atomically (a unique temporary file in `dir`, then a rename onto `path`);
/// returns whether it was written. An unwritable directory is not an error: the cache is an
/// optimisation.
bool write_cache_entry(const std::string& dir, const std::string& path, const std::string& key,
                       const std::string& obj);

} // namespace sj::codegen
