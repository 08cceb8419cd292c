// The caching device allocator: rounding, best-fit reuse, and a flush-and-retry when the device
// is full.
#include "CachingAllocator.h"

#include <symjax/Error.h>

#include <algorithm>
#include <utility>

namespace sj::cuda {

// Note [Caching allocator]
// cuMemAlloc and cuMemFree are slow (cuMemFree waits for the device), and a step of a network
// allocates and frees the same sizes every call. So, as PyTorch's CUDA caching allocator does, a
// freed block is kept in a pool ordered by size and handed to the next request it fits. This one
// is simpler than PyTorch's: one pool for all sizes, blocks are never split or merged, and one
// stream uses them all. The last point is what makes reuse safe without events: work on one
// stream runs in the order it was queued, so a kernel queued after a block was freed and taken
// again runs after every kernel queued before that reads the block's old contents.
// - Sizes are rounded up to 512 B, so requests that differ by a few bytes (a batch dimension of
//   odd size) share blocks.
// - Best fit, bounded: the smallest cached block of at least the request, but not one more than
//   twice as large; wasting more than half a block would let one small request hold a large
//   one. A request that finds none allocates a new block.
// - When the device is out of memory, the cached blocks are returned to it (they are free
//   memory the device cannot see) and the allocation is tried once more; only then does it fail,
//   with a message that says how much was asked, how much was cached (and freed) and how much
//   the live buffers hold. Fragmentation is the cost of not splitting blocks; the flush bounds
//   it at one retry.
// Blocks still in use when the allocator is destroyed are not freed: their owners outlive it
// only at process exit, where freeing device memory is pointless and can crash in the driver.

CachingAllocator::CachingAllocator(RawAlloc raw_alloc, RawFree raw_free, Describe describe)
    : raw_alloc_(std::move(raw_alloc)), raw_free_(std::move(raw_free)),
      describe_(std::move(describe)) {}

CachingAllocator::~CachingAllocator() {
    std::lock_guard<std::mutex> lock(mu_);
    try {
        release_cached();
    } catch (const Error&) { // a destructor must not throw; the memory goes with the process
    }
}

size_t CachingAllocator::round(size_t bytes) {
    if (bytes == 0)
        return kRound;
    return (bytes + kRound - 1) / kRound * kRound;
}

uint64_t CachingAllocator::alloc(size_t bytes) {
    const size_t want = round(bytes);
    std::lock_guard<std::mutex> lock(mu_);
    auto it = cached_.lower_bound(want);
    if (it != cached_.end() && it->first / kMaxWaste <= want) {
        const auto [size, p] = *it;
        cached_.erase(it);
        in_use_[p] = size;
        stats_.cached -= int64_t(size);
        stats_.in_use += int64_t(size);
        ++stats_.reuses;
        return p;
    }
    uint64_t p = raw_alloc_(want);
    const int64_t cached_before = stats_.cached;
    if (p == 0 && !cached_.empty()) {
        release_cached();
        p = raw_alloc_(want);
    }
    if (p == 0) {
        // (describe_ only asks the device, never this allocator: calling it under mu_ is safe)
        SJ_THROW(OutOfMemoryError)
            << "cuda device: out of memory allocating " << bytes << " bytes (" << want
            << " rounded): " << cached_before << " bytes were cached (returned to the device "
            << "and the allocation retried), " << stats_.in_use << " bytes are in use by live "
            << "buffers" << (describe_ ? "; " + describe_() : std::string());
    }
    in_use_[p] = want;
    stats_.in_use += int64_t(want);
    ++stats_.raw_allocs;
    stats_.peak = std::max(stats_.peak, stats_.in_use + stats_.cached);
    return p;
}

void CachingAllocator::free(uint64_t p) {
    if (p == 0)
        return;
    std::lock_guard<std::mutex> lock(mu_);
    auto it = in_use_.find(p);
    SJ_ASSERT(it != in_use_.end()) << "cuda device: free of address " << p
                                   << ", which the allocator did not hand out (or freed twice)";
    const size_t size = it->second;
    in_use_.erase(it);
    cached_.emplace(size, p);
    stats_.in_use -= int64_t(size);
    stats_.cached += int64_t(size);
}

void CachingAllocator::empty_cache() {
    std::lock_guard<std::mutex> lock(mu_);
    release_cached();
}

void CachingAllocator::release_cached() {
    while (!cached_.empty()) {
        auto it = cached_.begin();
        const auto [size, p] = *it;
        cached_.erase(it);
        stats_.cached -= int64_t(size);
        ++stats_.raw_frees;
        raw_free_(p);
    }
}

CachingAllocator::Stats CachingAllocator::stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
}

size_t CachingAllocator::block_size(uint64_t p) const {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = in_use_.find(p);
    return it == in_use_.end() ? 0 : it->second;
}

} // namespace sj::cuda
