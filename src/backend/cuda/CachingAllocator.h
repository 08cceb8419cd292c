// A caching allocator of device memory (Note [Caching allocator] in CachingAllocator.cpp): freed
// blocks are kept and reused, so that a training step does not call cuMemAlloc and cuMemFree
// (each a device synchronisation) for every buffer.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

namespace sj::cuda {

class CachingAllocator {
public:
    /// Allocates `bytes` from the device; returns 0 when the device is out of memory (other
    /// failures throw).
    using RawAlloc = std::function<uint64_t(size_t bytes)>;
    using RawFree = std::function<void(uint64_t p)>;
    /// Text appended to an out-of-memory error (the device's name and free memory).
    using Describe = std::function<std::string()>;

    /// Blocks are multiples of this (cudaMalloc's own alignment is 256 B).
    static constexpr size_t kRound = 512;
    /// A cached block serves a request of at least 1/kMaxWaste of its size.
    static constexpr size_t kMaxWaste = 2;

    struct Stats {
        int64_t in_use = 0; // bytes of the blocks handed out and not freed
        int64_t cached = 0; // bytes of the blocks freed and kept
        int64_t peak = 0;   // the largest in_use + cached seen (what the device had to give)
        int64_t raw_allocs = 0, raw_frees = 0, reuses = 0;
    };

    CachingAllocator(RawAlloc raw_alloc, RawFree raw_free, Describe describe = {});
    /// Returns the cached blocks to the device (blocks still in use are the owner's to free).
    ~CachingAllocator();
    CachingAllocator(const CachingAllocator&) = delete;
    CachingAllocator& operator=(const CachingAllocator&) = delete;

    /// `bytes` rounded up to kRound (0 asks for one block of kRound: every address is distinct
    /// and non-null).
    static size_t round(size_t bytes);

    /// A block of at least round(bytes): the smallest cached block that fits and is at most
    /// kMaxWaste times that, else a new one. When the device is out of memory, every cached
    /// block is returned to it and the allocation tried once more; then OutOfMemoryError names
    /// the bytes asked, cached and in use.
    uint64_t alloc(size_t bytes);
    /// Keeps the block for reuse. Throws InternalError for an address it did not hand out.
    void free(uint64_t p);
    /// Returns every cached block to the device.
    void empty_cache();
    Stats stats() const;
    /// The size of a block in use (its rounded size), 0 when p is not one.
    size_t block_size(uint64_t p) const;

private:
    void release_cached(); // with mu_ held
    RawAlloc raw_alloc_;
    RawFree raw_free_;
    Describe describe_;
    mutable std::mutex mu_;
    std::multimap<size_t, uint64_t> cached_;      // size -> block, for best fit
    std::unordered_map<uint64_t, size_t> in_use_; // block -> size
    Stats stats_;
};

} // namespace sj::cuda
