// The kernel cache's disk entries (docs/compiler.md, "Kernel cache"): where they live, their
// format, atomic writes and validated reads. Apart from the JIT (Jit.cpp) so that the entry
// reader builds alone, without LLVM: its fuzz target (fuzz/fuzz_kernel_cache.cpp) instruments
// just this file (tools/fuzz.sh --ci).
#include "KernelCache.h"

#include "../../core/Debug.h"
#include "../../core/Hash.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <sys/stat.h>
#include <unistd.h>

namespace sj::codegen {

namespace {
constexpr char kMagic[8] = {'S', 'J', 'K', 'C', 'A', 'C', 'H', 'E'};
} // namespace

uint64_t cache_checksum(const std::string& s) {
    detail::Hasher h;
    h.add_bytes(s.data(), s.size());
    return h.h;
}

std::string hex64(uint64_t v) {
    char b[17];
    std::snprintf(b, sizeof b, "%016llx", static_cast<unsigned long long>(v));
    return b;
}

namespace {

/// The largest entry read: a function's kernels make an object of kilobytes to a few megabytes.
constexpr off_t kMaxEntryBytes = off_t(256) << 20;

/// A present cache entry that cannot be used: a miss (the kernels are compiled), never an error;
/// SJ_DEBUG=1 says why.
std::string miss(const std::string& path, const std::string& why) {
    if (detail::debug_level() >= 1)
        std::fprintf(stderr, "[symjax] kernel cache: %s: %s; compiling instead\n", path.c_str(),
                     why.c_str());
    return "";
}

const char* file_kind(mode_t m) {
    if (S_ISDIR(m))
        return "a directory";
    if (S_ISFIFO(m))
        return "a FIFO";
    if (S_ISCHR(m))
        return "a character device";
    if (S_ISBLK(m))
        return "a block device";
    if (S_ISSOCK(m))
        return "a socket";
    return "not a regular file";
}

/// The bytes of a cache entry, read without following a symbolic link, without blocking (a
/// FIFO), and no more than its size (a device never ends); sets *why on failure.
std::string read_entry_bytes(const std::string& path, bool* present, std::string* why) {
    int fd = ::open(path.c_str(), O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        *present = errno != ENOENT && errno != ENOTDIR;
        *why = errno == ELOOP ? "a symbolic link (entries are regular files)"
                              : std::string("cannot open (") + std::strerror(errno) + ")";
        return "";
    }
    *present = true;
    std::string data;
    struct stat st;
    if (::fstat(fd, &st) != 0) {
        *why = std::string("cannot stat (") + std::strerror(errno) + ")";
    } else if (!S_ISREG(st.st_mode)) {
        *why = std::string(file_kind(st.st_mode)) + ", expected a regular file";
    } else if (st.st_size > kMaxEntryBytes) {
        *why = std::to_string(st.st_size) + " bytes, more than the " +
               std::to_string(kMaxEntryBytes) + " an entry may have";
    } else {
        data.resize(static_cast<size_t>(st.st_size));
        for (size_t got = 0; got < data.size();) {
            ssize_t r = ::read(fd, data.data() + got, data.size() - got);
            if (r < 0 && errno == EINTR)
                continue;
            if (r <= 0) {
                *why = r == 0 ? "shorter than its size (changed while read)"
                              : std::string("read failed (") + std::strerror(errno) + ")";
                data.clear();
                break;
            }
            got += static_cast<size_t>(r);
        }
    }
    ::close(fd);
    return data;
}

} // namespace

std::string read_cache_entry(const std::string& path, const std::string& key, bool* present) {
    *present = false;
    std::string why;
    std::string data;
    try {
        data = read_entry_bytes(path, present, &why);
    } catch (const std::exception& e) { // bad_alloc: an entry's size is at most kMaxEntryBytes
        *present = true;
        return miss(path, e.what());
    }
    if (!*present)
        return "";
    if (!why.empty())
        return miss(path, why);
    size_t need = sizeof kMagic + 4 + 8 + 8 + 8;
    if (data.size() < need || std::memcmp(data.data(), kMagic, sizeof kMagic) != 0)
        return miss(path, "not a kernel cache entry (no SJKCACHE header)");
    size_t p = sizeof kMagic;
    uint32_t schema;
    uint64_t klen, olen, sum;
    std::memcpy(&schema, data.data() + p, 4), p += 4;
    std::memcpy(&klen, data.data() + p, 8), p += 8;
    if (schema != kCacheSchema)
        return miss(path, "schema " + std::to_string(schema) + ", expected " +
                              std::to_string(kCacheSchema));
    if (klen != key.size() || data.size() - p < klen + 16 || data.compare(p, klen, key) != 0)
        return miss(path, "the entry of another key (a hash collision or a damaged key)");
    p += klen;
    std::memcpy(&olen, data.data() + p, 8), p += 8;
    std::memcpy(&sum, data.data() + p, 8), p += 8;
    if (data.size() - p != olen)
        return miss(path, "object of " + std::to_string(data.size() - p) +
                              " bytes, the entry says " + std::to_string(olen));
    std::string obj = data.substr(p);
    if (cache_checksum(obj) != sum)
        return miss(path, "checksum mismatch (a damaged object)");
    return obj;
}

std::string encode_cache_entry(const std::string& key, const std::string& obj) {
    uint32_t schema = kCacheSchema;
    uint64_t klen = key.size(), olen = obj.size(), sum = cache_checksum(obj);
    std::string out(kMagic, sizeof kMagic);
    out.append(reinterpret_cast<const char*>(&schema), 4);
    out.append(reinterpret_cast<const char*>(&klen), 8);
    out += key;
    out.append(reinterpret_cast<const char*>(&olen), 8);
    out.append(reinterpret_cast<const char*>(&sum), 8);
    out += obj;
    return out;
}

bool write_cache_entry(const std::string& dir, const std::string& path, const std::string& key,
                       const std::string& obj) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec)
        return false; // the cache is an optimisation: an unwritable directory is not an error
    std::string tmp = path + ".tmp." + std::to_string(::getpid()) + "." +
                      hex64(reinterpret_cast<uintptr_t>(&obj) ^ cache_checksum(obj));
    {
        std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
        if (!f)
            return false;
        const std::string bytes = encode_cache_entry(key, obj);
        f.write(bytes.data(), std::streamsize(bytes.size()));
        f.close(); // flushes: a failed final write must not rename a partial file into place
        if (!f) {
            std::remove(tmp.c_str());
            return false;
        }
    }
    if (std::rename(tmp.c_str(), path.c_str()) == 0)
        return true;
    std::remove(tmp.c_str());
    return false;
}

std::string cache_dir() {
    if (const char* d = std::getenv("SJ_CACHE_DIR"))
        return std::string(d) == "off" ? "" : d;
    if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x)
        return std::string(x) + "/symjax";
    if (const char* h = std::getenv("HOME"); h && *h)
        return std::string(h) + "/.cache/symjax";
    return "";
}

} // namespace sj::codegen
