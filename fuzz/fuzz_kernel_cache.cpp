// libFuzzer target: kernel-cache entries (src/backend/cpu/Jit.cpp). The first byte picks how the
// rest is used:
//   0: the rest is the entry file, read for a fixed key;
//   1: a well-formed entry around the rest (the key is its first up-to-64 bytes' length-prefixed
//      part, the object the remainder) must read back exactly;
//   2: the same entry with one byte changed (position and value from the input) must read back
//      as exactly the object or as a miss, never as other bytes.
// A read never throws, so anything escaping, and any wrong object, is a finding.
#include "FuzzUtil.h"

#include "backend/llvm/KernelCache.h"

#include <cstdio>
#include <cstdlib>
#include <string>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    if (size == 0) return 0;
    const int mode = data[0] % 3;
    std::string rest(reinterpret_cast<const char*>(data + 1), size - 1);
    const std::string fixed_key = "kernel sjk_fuzz\nfuzz";
    std::string key = fixed_key, obj, entry = rest;
    if (mode != 0) {
        size_t klen = rest.empty() ? 0 : static_cast<uint8_t>(rest[0]) % 65;
        klen = std::min(klen, rest.size() > 0 ? rest.size() - 1 : 0);
        key = rest.substr(rest.empty() ? 0 : 1, klen);
        obj = rest.size() > 1 + klen ? rest.substr(1 + klen) : "";
        entry = sj::codegen::encode_cache_entry(key, obj);
        if (mode == 2 && !entry.empty() && obj.size() >= 2) {
            size_t at = (static_cast<uint8_t>(obj[0]) * 257u + static_cast<uint8_t>(obj[1])) %
                        entry.size();
            entry[at] = static_cast<char>(entry[at] ^ (1 + static_cast<uint8_t>(obj[0]) % 255));
        }
    }
    std::string path = sj::fuzz::write_input(reinterpret_cast<const uint8_t*>(entry.data()),
                                             entry.size(), ".sjk");
    bool present = false;
    std::string got;
    try {
        got = sj::codegen::read_cache_entry(path, key, &present);
    } catch (...) {
        std::fprintf(stderr, "read_cache_entry threw\n");
        std::abort();
    }
    if (!present) {
        std::fprintf(stderr, "an existing entry file read as absent\n");
        std::abort();
    }
    if (mode == 1 && got != obj) {
        std::fprintf(stderr, "a well-formed entry did not read back (%zu bytes, got %zu)\n",
                     obj.size(), got.size());
        std::abort();
    }
    // an empty object reads as a miss by design (nothing to load), so only non-empty results
    // are checked against the object
    if (mode == 2 && !got.empty() && got != obj) {
        std::fprintf(stderr, "a damaged entry read as other bytes\n");
        std::abort();
    }
    return 0;
}
