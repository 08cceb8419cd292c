// A small 64-bit hasher for interning nodes and content-hashing constants.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

namespace sj::detail {

inline uint64_t mix64(uint64_t x) {
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    x *= 0xc4ceb9fe1a85ec53ULL;
    x ^= x >> 33;
    return x;
}

struct Hasher {
    uint64_t h = 0x9e3779b97f4a7c15ULL;
    void add(uint64_t v) { h = mix64(h ^ (v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2))); }
    void add_bytes(const void* p, size_t n) {
        const auto* b = static_cast<const unsigned char*>(p);
        size_t i = 0;
        for (; i + 8 <= n; i += 8) {
            uint64_t w;
            std::memcpy(&w, b + i, 8);
            add(w);
        }
        uint64_t tail = 0;
        std::memcpy(&tail, b + i, n - i);
        add(tail ^ (uint64_t(n) << 56));
    }
};

} // namespace sj::detail
