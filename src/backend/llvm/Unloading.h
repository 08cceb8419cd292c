// What the targets that JIT-link code in this process share to unload it again (Note [Unloading
// kernels] in src/backend/cpu/Jit.cpp): the code a caller no longer holds goes, except the
// objects used last, and a resource tracker is removed with its failure logged.
#pragma once

#include <llvm/ExecutionEngine/Orc/Core.h>
#include <llvm/Support/Error.h>

#include <cstdint>
#include <cstdio>
#include <list>
#include <unordered_map>
#include <utility>
#include <vector>

namespace sj::codegen {

/// Holds on the `capacity` objects used last, by number. Not thread-safe: the owner's lock
/// guards it. A hold that leaves goes to `released`, which the caller destroys after unlocking
/// (a last hold's destructor takes that lock to unload its object).
template <class Hold> class RecentHolds {
public:
    explicit RecentHolds(size_t capacity) : capacity_(capacity) {}

    /// Object `id` (held by `hold`) was used now: it becomes the latest.
    void use(uint64_t id, const Hold& hold, std::vector<Hold>& released) {
        if (auto it = at_.find(id); it != at_.end())
            list_.splice(list_.end(), list_, it->second);
        else if (capacity_ > 0)
            at_[id] = list_.insert(list_.end(), {id, hold});
        trim(released);
    }

    /// Keeps the `capacity` latest from now on.
    void resize(size_t capacity, std::vector<Hold>& released) {
        capacity_ = capacity;
        trim(released);
    }

    /// Gives up every hold (into `released`).
    void clear(std::vector<Hold>& released) { resize(0, released); }

private:
    void trim(std::vector<Hold>& released) {
        while (list_.size() > capacity_) {
            at_.erase(list_.front().first);
            released.push_back(std::move(list_.front().second));
            list_.pop_front();
        }
    }

    size_t capacity_;
    std::list<std::pair<uint64_t, Hold>> list_; // the latest at the back
    std::unordered_map<uint64_t, typename std::list<std::pair<uint64_t, Hold>>::iterator> at_;
};

/// Removes tracker `t`'s code from the process; a failure leaves the code mapped and is logged
/// under `who` ("cpu backend", "cuda emulator"): nothing to recover.
inline void remove_tracker(const llvm::orc::ResourceTrackerSP& t, const char* who) {
    if (auto err = t->remove())
        std::fprintf(stderr, "[symjax] %s: unloading kernels: %s\n", who,
                     llvm::toString(std::move(err)).c_str());
}

} // namespace sj::codegen
