// Copies that only move bits: an element of 1, 2, 4 or 8 bytes as an unsigned integer of its
// width (the cpu library kernels of Indexing.cpp and Movement.cpp).
#pragma once

#include <cstdint>

namespace sj::cpu {

/// fn(B{}) with B the unsigned integer of `bytes` bytes (1, 2, 4 or 8: every dtype's width).
template <class F> void with_element_bits(int64_t bytes, F&& fn) {
    if (bytes == 1)
        fn(uint8_t{});
    else if (bytes == 2)
        fn(uint16_t{});
    else if (bytes == 4)
        fn(uint32_t{});
    else
        fn(uint64_t{});
}

} // namespace sj::cpu
