// sort on the CPU (Note [Sorting packed keys]).
#include "Sort.h"

#include "../reference/Iterate.h"
#include "ThreadPool.h"

#include <symjax/Error.h>
#include <symjax/ir/Attrs.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <memory>
#include <new>
#include <type_traits>

namespace sj::cpu {

// Note [Sorting packed keys]
// The reference kernel sorts a line's positions with a comparison that tests for NaN on every
// call. Here each key becomes an unsigned integer whose plain order is the sort's order (Note
// [Sort] in src/ops/Sort.cpp): a float's bits with the sign bit flipped for positive numbers
// and every bit flipped for negative ones (IEEE order), -0.0 first made +0.0 and every NaN the
// largest code; signed integers with the sign bit flipped; all of it complemented for a
// descending sort. A 32-bit code and the element's position share one 64-bit word, code high;
// a 64-bit code is paired with its position. Then, per line:
//   - a line of at least kRadixMin sorts by LSD radix over the code's bytes (8-bit digits, the
//     histograms of every digit counted in one pass, a digit all items share skipped). LSD radix
//     is stable and the items start in position order, so equal codes keep position order;
//   - a shorter line sorts the words with std::sort (the position in the word breaks ties);
//   - top_k with k <= kFewMax and k <= n / 16 reads the line once, keeping the k best words in
//     a sorted buffer (a word that loses to the k-th best costs one comparison); a larger k
//     below n / 2 selects with nth_element and sorts the k first.
// Lines (every index but the axis) are split over the thread team when there are enough of
// them; a single long line runs on the calling thread. Same order as the reference kernel,
// position by position: the op table's sort rows and tests/unit/SortCpuTest.cpp compare them,
// bit for bit. `bench/run sort` measures it against torch.sort and torch.topk
// (docs/performance.md, "Sorting").

namespace {

/// Element-levels (elements times log2 of the line's length) below which a sort stays on the
/// calling thread.
constexpr double kTeamWork = 3e4;

/// The 32- or 64-bit code of a key (ascending order = the codes' order).
template <class T> auto code(T v) {
    if constexpr (std::is_same_v<T, float> || std::is_same_v<T, double>) {
        // integer operations and selects only, so that the loops that code a line vectorise
        using U = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;
        using S = std::make_signed_t<U>;
        constexpr int top = 8 * sizeof(T) - 1;
        constexpr U sign = U(1) << top;
        constexpr U inf = sizeof(T) == 4 ? U(0x7f800000u) : U(0x7ff0000000000000ull);
        const U b = std::bit_cast<U>(v);
        const U mag = b & ~sign;
        const U z = mag == 0 ? U(0) : b;         // -0.0 sorts as +0.0
        const U c = z ^ (U(S(z) >> top) | sign); // negative: every bit flipped; else the sign bit
        return mag > inf ? ~U(0) : c;            // NaN: the largest code
    } else if constexpr (std::is_same_v<T, int32_t>) {
        return uint32_t(v) ^ 0x80000000u;
    } else if constexpr (std::is_same_v<T, int64_t>) {
        return uint64_t(v) ^ (uint64_t(1) << 63);
    } else {
        return uint32_t(v); // u8, bool, u32
    }
}

/// codes[i] = code(line[i]) ^ flip for a whole block of B contiguous keys (a fixed trip count,
/// so the loop vectorises), and the smallest of them.
template <class T, class U, int64_t B>
[[gnu::always_inline]] inline U code_loop(const T* line, U flip, U* codes) {
    U lo = ~U(0);
    for (int64_t i = 0; i < B; ++i) {
        U c = U(code(line[i]) ^ flip);
        codes[i] = c;
        lo = c < lo ? c : lo;
    }
    return lo;
}
template <class T, class U, int64_t B> U code_block_baseline(const T* line, U flip, U* codes) {
    return code_loop<T, U, B>(line, flip, codes);
}
/// The loop compiled for AVX-512: unsigned min and compare are one instruction each there, which
/// the baseline x86-64 build emulates (3x slower top_k on this VM's Zen 5).
template <class T, class U, int64_t B>
__attribute__((target("avx512f"))) U code_block_avx512(const T* line, U flip, U* codes) {
    return code_loop<T, U, B>(line, flip, codes);
}
template <class T, class U, int64_t B> U code_block(const T* line, U flip, U* codes) {
    static const bool avx512 = __builtin_cpu_supports("avx512f");
    return avx512 ? code_block_avx512<T, U, B>(line, flip, codes)
                  : code_block_baseline<T, U, B>(line, flip, codes);
}

/// Lines at least this long sort by radix (Note [Sorting packed keys]); shorter ones by std::sort.
constexpr int64_t kRadixMin = 256;
/// top_k with k at most this (and at most n / 16) keeps the k best in a sorted buffer while it
/// reads the line once, kFewBlock codes at a time.
constexpr int64_t kFewMax = 64;
constexpr int64_t kFewBlock = 256;
/// Within a block that holds a candidate, runs of this many codes are tested by their minimum.
constexpr int64_t kFewRun = 16;

/// A 64-bit code and its position (default-initialised: scratch of them is not zeroed).
struct Wide {
    uint64_t code;
    int64_t pos;
    bool operator<(const Wide& o) const { return code < o.code || (code == o.code && pos < o.pos); }
};

/// Two buffers of items per thread, grown to the longest line seen and kept, as the conv
/// arena is (fresh ones would fault in their pages on every call: for a line of 1M, more time
/// than the sort): 16 bytes an element of the longest line, 32 for 64-bit keys.
template <class Item> struct Scratch {
    std::unique_ptr<Item[]> a, b;
    size_t cap = 0;
    void reserve(size_t n) {
        if (n <= cap)
            return;
        cap = 0; // a failed allocation leaves no buffers
        a.reset(new (std::nothrow) Item[n]);
        b.reset(new (std::nothrow) Item[n]);
        SJ_CHECK(a && b, OutOfMemoryError) << "out of memory allocating " << 2 * n * sizeof(Item)
                                           << " bytes to sort lines of " << n << " elements";
        cap = n;
    }
};
template <class Item> Scratch<Item>& thread_scratch() {
    thread_local Scratch<Item> s;
    return s;
}

/// Stable LSD radix sort of a[0, n) by `bytes` bytes of word(item), from byte `first` up (8-bit
/// digits; a digit every item shares is skipped), using tmp[0, n); returns where the sorted
/// items are (a or tmp).
template <class Item, class Word>
Item* radix_sort(Item* a, Item* tmp, size_t n, Word word, int first, int bytes) {
    uint32_t counts[8][256] = {};
    for (size_t i = 0; i < n; ++i) {
        uint64_t w = word(a[i]) >> (8 * first);
        for (int b = 0; b < bytes; ++b)
            ++counts[b][(w >> (8 * b)) & 255];
    }
    for (int b = 0; b < bytes; ++b) {
        const int shift = 8 * (first + b);
        uint32_t* c = counts[b];
        if (c[(word(a[0]) >> shift) & 255] == n)
            continue; // every item has this digit: the pass would not move one
        uint32_t sum = 0;
        for (int d = 0; d < 256; ++d) {
            uint32_t t = c[d];
            c[d] = sum;
            sum += t;
        }
        for (size_t i = 0; i < n; ++i)
            tmp[c[(word(a[i]) >> shift) & 255]++] = a[i];
        std::swap(a, tmp);
    }
    return a;
}

/// A line's order: the positions of its first k elements after sorting, into `perm`.
template <class T> struct LineSorter {
    using U = decltype(code(T()));
    // 32-bit codes: one word, code << 32 | position; 64-bit codes: (code, position)
    using Item = std::conditional_t<sizeof(U) == 4, uint64_t, Wide>;
    bool descending;
    int64_t n, k;
    std::vector<Item> best; // top-k's sorted buffer

    static Item make_item(U c, int64_t j) {
        if constexpr (sizeof(U) == 4)
            return uint64_t(c) << 32 | uint64_t(j);
        else
            return {c, j};
    }
    static U code_of(const Item& it) {
        if constexpr (sizeof(U) == 4)
            return U(it >> 32);
        else
            return it.code;
    }
    static int64_t position(const Item& it) {
        if constexpr (sizeof(U) == 4)
            return int64_t(it & 0xffffffffu);
        else
            return it.pos;
    }

    void order(const T* key, int64_t stride, std::vector<int64_t>& perm) {
        const U flip = descending ? ~U(0) : U(0); // descending: the complemented codes
        if (k <= kFewMax && k * 16 <= n) { // top-k: most elements lose one comparison
            best.clear();
            U codes[kFewBlock];
            for (int64_t j0 = 0; j0 < n; j0 += kFewBlock) {
                const int64_t m = std::min<int64_t>(kFewBlock, n - j0);
                // a later position never wins a tie, so only a smaller code than the k-th best
                // can enter (anything enters until the buffer is full)
                U lo = ~U(0);
                if (stride == 1 && m == kFewBlock) {
                    lo = code_block<T, U, kFewBlock>(key + j0, flip, codes);
                } else {
                    for (int64_t i = 0; i < m; ++i) {
                        U c = U(code(key[(j0 + i) * stride]) ^ flip);
                        codes[i] = c;
                        lo = c < lo ? c : lo;
                    }
                }
                const bool any = int64_t(best.size()) < k || lo < code_of(best.back());
                if (!any)
                    continue;
                // by runs of kFewRun: a run whose smallest code cannot enter is skipped whole
                for (int64_t r0 = 0; r0 < m; r0 += kFewRun) {
                    const int64_t r1 = std::min(m, r0 + kFewRun);
                    if (int64_t(best.size()) == k) {
                        U run_lo = ~U(0);
                        for (int64_t i = r0; i < r1; ++i)
                            run_lo = codes[i] < run_lo ? codes[i] : run_lo;
                        if (!(run_lo < code_of(best.back())))
                            continue;
                    }
                    for (int64_t i = r0; i < r1; ++i) {
                        Item it = make_item(codes[i], j0 + i);
                        if (int64_t(best.size()) == k) {
                            if (!(it < best.back()))
                                continue;
                            best.pop_back();
                        }
                        best.insert(std::upper_bound(best.begin(), best.end(), it), it);
                    }
                }
            }
            for (int64_t j = 0; j < k; ++j)
                perm[size_t(j)] = position(best[size_t(j)]);
            return;
        }
        Scratch<Item>& s = thread_scratch<Item>();
        s.reserve(size_t(n));
        Item* items = s.a.get();
        for (int64_t j = 0; j < n; ++j)
            items[j] = make_item(U(code(key[j * stride]) ^ flip), j);
        if (k < n / 2) {
            std::nth_element(items, items + k, items + n);
            std::sort(items, items + k);
        } else if (n >= kRadixMin) {
            if constexpr (sizeof(U) == 4)
                items = radix_sort(
                    items, s.b.get(), size_t(n), [](uint64_t w) { return w; }, 4, 4);
            else
                items = radix_sort(
                    items, s.b.get(), size_t(n), [](const Wide& w) { return w.code; }, 0, 8);
        } else {
            std::sort(items, items + n);
        }
        for (int64_t j = 0; j < k; ++j)
            perm[size_t(j)] = position(items[j]);
    }
};

/// Copies the k elements perm picks from a line of `src` into a line of `dst`, as W-byte words.
template <class W>
void place_as(const unsigned char* src, unsigned char* dst, int64_t stride,
              const std::vector<int64_t>& perm, int64_t k) {
    auto* d = reinterpret_cast<W*>(dst);
    auto* s = reinterpret_cast<const W*>(src);
    for (int64_t j = 0; j < k; ++j)
        d[j * stride] = s[perm[size_t(j)] * stride];
}

/// The same for elements of `width` bytes.
void place(const unsigned char* src, unsigned char* dst, int64_t stride, size_t width,
           const std::vector<int64_t>& perm, int64_t k) {
    switch (width) {
    case 1:
        return place_as<uint8_t>(src, dst, stride, perm, k);
    case 4:
        return place_as<uint32_t>(src, dst, stride, perm, k);
    case 8:
        return place_as<uint64_t>(src, dst, stride, perm, k);
    }
    for (int64_t j = 0; j < k; ++j)
        std::memcpy(dst + size_t(j * stride) * width,
                    src + size_t(perm[size_t(j)] * stride) * width, width);
}

} // namespace

void sort(const Node& node, const std::vector<Array>& in, Array& out, uint64_t) {
    const auto& a = node.attr<SortAttrs>();
    const Array& keys = in[0];
    const Array& values = in.back();
    int64_t outer, n, inner;
    ref::split_axis(keys.shape(), a.axis, outer, n, inner);
    const int64_t k = out.shape()[size_t(a.axis)]; // the type rule checked k <= n
    SJ_CHECK(n <= int64_t(UINT32_MAX), InputError)
        << node.describe() << ": " << n
        << " elements along the axis; at most 2^32 - 1 can be sorted";
    const int64_t lines = outer * inner;
    if (lines == 0 || k == 0)
        return;
    const size_t width = size_t(dtype_size(values.dtype()));
    const auto* src = static_cast<const unsigned char*>(values.raw());
    auto* dst = static_cast<unsigned char*>(out.raw());
    dispatch(keys.dtype(), [&](auto tag) {
        using T = typename decltype(tag)::type;
        const T* kp = static_cast<const T*>(keys.raw());
        auto run = [&](int64_t l0, int64_t l1) {
            LineSorter<T> sorter{a.descending, n, k, {}};
            std::vector<int64_t> perm(static_cast<size_t>(k));
            for (int64_t l = l0; l < l1; ++l) {
                int64_t o = l / inner, i = l % inner;
                sorter.order(kp + o * n * inner + i, inner, perm);
                if (a.indices) {
                    int64_t* q = static_cast<int64_t*>(out.raw()) + o * k * inner + i;
                    for (int64_t j = 0; j < k; ++j)
                        q[j * inner] = perm[size_t(j)];
                    continue;
                }
                place(src + size_t(o * n * inner + i) * width,
                      dst + size_t(o * k * inner + i) * width, inner, width, perm, k);
            }
        };
        // a few ns per element and level of the sort: a team for more than ~0.1 ms of work
        ThreadPool& pool = ThreadPool::get();
        double work = double(lines) * double(n) * std::log2(double(n) + 2.0);
        int tasks = int(std::min<int64_t>(lines, 4 * int64_t(pool.threads())));
        if (pool.threads() < 2 || tasks < 2 || work < kTeamWork) {
            run(0, lines);
            return;
        }
        pool.run(tasks, [&](int t) { run(lines * t / tasks, lines * (t + 1) / tasks); });
    });
}

} // namespace sj::cpu
