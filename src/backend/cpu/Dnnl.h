// oneDNN plumbing shared by the cpu backend's library calls: the engine, the thread count and
// the post-ops of fused epilogues.
#pragma once

#include "../../compiler/Fusion.h"

#include <dnnl.hpp>

#include <list>
#include <string>
#include <vector>

namespace sj::cpu {

/// The CPU engine (one per process).
const dnnl::engine& dnnl_engine();

/// Gives oneDNN's OpenMP regions started from the calling thread as many threads as our pool
/// has (SJ_NUM_THREADS, else the hardware threads), so a library call and our kernels use the
/// same cores and SJ_NUM_THREADS limits both. Cheap: sets the count once per calling thread.
void match_dnnl_threads();

/// While alive, oneDNN primitives created on the calling thread plan their work for one thread
/// (oneDNN reads the OpenMP thread count when a primitive is made), and GEMM-based ones run on
/// one. Such a primitive may run inside our parallel regions, where oneDNN's parallel() runs one
/// thread: a jit convolution planned for two hangs there at its reduction's barrier (Note
/// [Thread-count-independent weight gradients] in Conv.cpp). Restores the previous count when
/// destroyed.
class OneDnnlThread {
public:
    OneDnnlThread();
    ~OneDnnlThread();
    OneDnnlThread(const OneDnnlThread&) = delete;
    OneDnnlThread& operator=(const OneDnnlThread&) = delete;

private:
    int previous_;
};

/// Where a library call's result holds its channels, for the operands of its post-ops: the
/// logical rank of the result as oneDNN sees it, the channel dim and the channel count.
struct ChannelDim {
    int rank = 0, dim = 0;
    int64_t channels = 0;
};

/// `attr` with the epilogue's post-ops from `first` on (Note [Epilogue fusion] in
/// src/compiler/Fusion.cpp; the ones before are the call's bias and weight scales: Note [Affine
/// prefix]).
void set_post_ops(dnnl::primitive_attr& attr, const std::vector<compiler::PostOp>& epilogue,
                  const ChannelDim& c, size_t first = 0);

/// How many leading post-ops are per-channel affine steps (add, sub, mul by a per-channel or
/// one value; linear), the ones that only shift (no mul, linear with alpha 1) when !scale.
size_t affine_prefix(const std::vector<compiler::PostOp>& epilogue, bool scale);

/// The first n post-ops as y = scale[c] * x + shift[c], computed from their operands.
void affine_of(const std::vector<compiler::PostOp>& epilogue, size_t n,
               const std::vector<const Array*>& operands, int64_t channels, float* scale,
               float* shift);

/// The post-ops' part of a primitive cache key.
std::string post_ops_key(const std::vector<compiler::PostOp>& epilogue);

/// The oneDNN memory objects of one call site's arguments, kept between its calls (Note [Call
/// arguments kept] in Dnnl.cpp): made on the first call, re-pointed when a buffer moves, dropped
/// when the call site runs another primitive. One call at a time uses it; a copy starts empty.
class KeptMemories {
public:
    KeptMemories() = default;
    KeptMemories(const KeptMemories&) {}
    KeptMemories& operator=(const KeptMemories&) {
        clear();
        return *this;
    }

    /// Starts a call of `owner` (the primitive the memories are for): what was kept for another
    /// one is dropped.
    void begin(const void* owner) {
        if (owner != owner_) {
            clear();
            owner_ = owner;
        }
    }
    /// The memory kept under `key` (a DNNL_ARG_* or another number the caller picks), pointing
    /// at `ptr`; made with descriptor desc() the first time. A key's descriptor is fixed by the
    /// owner.
    template <class Desc> const dnnl::memory& at(int key, void* ptr, Desc&& desc) {
        for (Kept& k : kept_)
            if (k.key == key) {
                if (k.ptr != ptr) {
                    k.mem.set_data_handle(ptr);
                    k.ptr = ptr;
                }
                return k.mem;
            }
        kept_.push_back({key, dnnl::memory(desc(), dnnl_engine(), ptr), ptr});
        return kept_.back().mem;
    }
    /// n sets of their own, one for each task of a parallel region (made by the calling thread
    /// before the region; task t uses the t-th only).
    KeptMemories* tasks(size_t n) {
        if (tasks_.size() < n)
            tasks_.resize(n);
        return tasks_.data();
    }

private:
    struct Kept {
        int key;
        dnnl::memory mem;
        void* ptr;
    };
    void clear() {
        kept_.clear();
        tasks_.clear();
        owner_ = nullptr;
    }
    const void* owner_ = nullptr;
    // (at()'s references stay valid as it grows; an empty list allocates nothing, so a call
    // site that keeps none pays nothing for its local one)
    std::list<Kept> kept_;
    std::vector<KeptMemories> tasks_;
};

/// A primitive's arguments for one execution, as oneDNN's C API takes them: no map to build and
/// free per call (Note [Call arguments kept] in Dnnl.cpp). The memories must outlive execute().
class ExecArgs {
public:
    void add(int id, const dnnl::memory& m) { args_.push_back({id, m.get()}); }
    /// Runs `p` on the stream with these arguments (dnnl::error on failure).
    void execute(const dnnl::primitive& p, const dnnl::stream& s) const;
    /// The buffer of argument `id` (null when there is none).
    void* data(int id) const;

private:
    std::vector<dnnl_exec_arg_t> args_;
};

/// The calling thread's stream on the engine (a stream made per call cost ~1.5 us when cold).
dnnl::stream& thread_stream();

/// Adds the binary post-ops' operands (`operands[i]` for epilogue[i]; null for the others) to a
/// primitive's execution arguments, their memories kept in `kept` under keys of their own.
void add_post_op_args(ExecArgs& args, KeptMemories& kept,
                      const std::vector<compiler::PostOp>& epilogue,
                      const std::vector<const Array*>& operands, const ChannelDim& c,
                      size_t first = 0);

} // namespace sj::cpu
