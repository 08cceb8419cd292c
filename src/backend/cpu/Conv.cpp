// Convolution and pooling through oneDNN: primitives built once per (op, shapes, attrs), kept in
// a process-wide LRU cache, run on our row-major buffers (reordered to the primitive's preferred
// layout where that is faster; Note [Conv layouts]).
#include "Conv.h"

#include "../../core/Debug.h"
#include "../../ops/ChannelBlocking.h"
#include "CpuTarget.h"
#include "Dnnl.h"
#include "Sums.h"
#include "ThreadPool.h"

#include <symjax/ir/Attrs.h>
#include <symjax/ir/Node.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <list>
#include <mutex>
#include <numeric>
#include <optional>
#include <unordered_map>

namespace sj::cpu {

// Note [Conv layouts]
// Our arrays are row-major NC(D)HW / OI(D)HW. oneDNN's direct convolutions want blocked layouts
// (nChw16c activations, OIhw16i16o-like weights on AVX-512); on plain layouts it falls back to
// im2col + GEMM. So a convolution asks for nChw16c activations (where C is a multiple of 16; a
// first layer's 3 channels stay plain, which oneDNN's direct kernels read) and lets oneDNN pick
// the weights' layout, and every call reorders to and from them: the reorders are memory bound
// (~1 ms for 8 MB) next to a compute-bound convolution. Measured on one thread (min of 15-20
// calls; the 2-core machine was shared, so ranges), N=32, C=64->64, 32x32, 3x3, pad 1, 2.4 GFLOP:
//   blocked + reorders      fwd 19-27 ms   bwd_data 15-31 ms   bwd_filter 15-28 ms
//   oneDNN's own choice     fwd 27-32 ms   bwd_data 33 ms      bwd_filter 33 ms  (nhwc brgconv)
//   plain (GEMM)            fwd 39-51 ms   bwd_data 66-71 ms   bwd_filter 57-85 ms
//   reference kernel        fwd 1548 ms    bwd_data 1677 ms    bwd_filter 1236 ms
// and N=128, C=32->32: blocked 27/26/28 ms against plain 50-63/77-86/84-109 ms; first layer
// C=3->32: blocked 0.6/1.1-1.5/0.5 ms against plain 1.0/1.3-1.5/2.8 ms. A configuration no fast
// implementation takes in blocked layouts (e.g. 8 channels per group) uses the plain ones.
// Pooling is memory bound and oneDNN pools plain layouts directly, so pools stay plain.
//
// Note [Max-pool workspace]
// oneDNN's max-pooling backward needs the forward's workspace (the argmax of each window). Our
// graph keeps max_pool_backward(x, dy) a pure function of x and dy, so either op can be
// rewritten, recomputed or cached on its own, and on its own its primitive runs the forward pass
// with a workspace first, then the backward: one more pass over x (about what the forward pool
// costs). In a training step both ops are in one plan: the cpu backend pairs a max-pool
// backward with the step that pools the same value with the same window, earlier in the same
// call (CpuExecutable's make_plan), when the two workspace layouts agree. That forward then runs
// in training mode (window_primitive's keep_workspace: a primitive of its own in the cache) and
// keeps its workspace for the call; the backward reads it and skips its forward pass. A pool
// whose backward is not in the function runs in inference mode, as before.
//
// Note [Thread-count-independent weight gradients]
// A weight gradient is a sum over the batch. oneDNN 2.6's backward-weights convolution plans its
// work for the thread count when the primitive is made: it gives each of up to T threads part of
// the batch and adds their partial gradients, so 1 and 2 threads summed in different orders and
// CNN training differed between them in the last bits (oneDNN 3.4 added a deterministic mode;
// 2.6 has none). So conv_backward_filter cuts the batch into filter_chunk_count(N, ...) chunks, a
// function of the shapes alone (below), runs each chunk through a primitive planned for one thread
// into its own partial gradient, and adds the partials in chunk order (in double): the threads
// only decide who computes which chunk, as in Note [Thread-count-independent sums] in
// CpuExecutable.cpp. The primitives must be *planned* for one thread (OneDnnlThread): oneDNN
// reads the thread count when a primitive is made, and inside our parallel region its parallel()
// runs one thread (omp_in_parallel). Measured with oneDNN 2.6 on [64, 16, 32, 32] x 3x3 x 32: a
// jit:avx512_core primitive planned for two threads, run inside a parallel region, never returns
// (its first thread waits at the reduction's barrier for the second); one planned for one thread
// gives the same bits inside a region and outside. GEMM-based primitives (plain layouts) also
// ask for the thread count when they run, so a chunk runs with OneDnnlThread too. Cost, measured
// on AMD EPYC (docs/performance.md, "Deterministic conv weight gradients"): the brief CNN's
// training step at 2 threads the same or faster (no barrier between the chunks); at 1 thread and
// batch 32 (two images a chunk) the weight gradients take ~10% longer, 0-5% of the step.
// The inputs are reordered to the chunks' layout once for the whole batch: nC(d)hw16c and plain
// layouts keep the batch outermost, so a chunk is a contiguous piece of the reordered buffer.
//
// How many chunks (filter_chunk_count): each chunk writes a whole partial gradient and the sum
// reads it back, and each is a primitive call of its own, so a chunk has a fixed cost whatever
// its images, while its useful work grows with its images times their output positions (the
// multiply-adds per weight). Until 2026-12-03 the count was min(N, 16); on an AVX-512 EPYC at 2
// threads (docs/performance.md, "Weight-gradient chunks by work") that cost the SymJAX paper's
// network's step ~0.4 ms of its 9.3: its 8x8 and 4x4 layers (32 channels) ran their weight
// gradients 35-65% slower on 16 chunks than on 4. So a chunk now holds at least kChunkPositions
// output positions (images x positions per image), and there are between min(N, 4) and
// min(N, 16) chunks: large images keep 16, small ones fall to 4. The floor is for machines with
// more cores than ours: 4 chunks cost the same as 2 here (measured), and leave 4 threads work.
// The count is still a function of the shapes alone.
//
// The sum of the partials ran in a parallel region of its own after the chunks' region. For
// small weights (the CNN benchmarks' layers: 9,216 floats on 4 chunks) that region cost more
// than the adding: on the AMD EPYC (Zen 5, 2 threads) a 4x4 layer's call (32 channels, batch
// 32) spent 14-15 us of its 70 in it. Small partials were then added by the task that finished
// its chunks last, inside the chunks' region (66 us a call), but that task read the other
// cores' partials alone: 14-15 us of a 4x4 layer's 60 (hot, `perf`), most of it lines moved
// from the other core. Now each task adds its share of the elements, every chunk's partial in
// chunk order, after a barrier in the same region (ThreadPool::run with a second phase: Note
// [Work after a barrier] in ThreadPool.cpp). Each element is added in the same order whoever
// adds it, so the bits do not change.
constexpr int64_t kFilterChunks = 16;
constexpr int64_t kMinFilterChunks = 4;
constexpr int64_t kChunkPositions = 2048;

int64_t filter_chunk_count(int64_t batch, int64_t positions) {
    const int64_t by_work = batch * positions / kChunkPositions;
    return std::clamp(by_work, std::min(batch, kMinFilterChunks), std::min(batch, kFilterChunks));
}

namespace {

using dnnl::memory;
using dt = memory::data_type;

memory::dims dims_of(const Shape& s) { return memory::dims(s.begin(), s.end()); }

memory::desc plain(const Shape& s) {
    return memory::desc(dims_of(s), dt::f32, dims_of(row_major_strides(s)));
}

memory::desc any(const Shape& s) {
    return memory::desc(dims_of(s), dt::f32, memory::format_tag::any);
}

/// Conv weights [O, I, k...] as oneDNN takes them: [G, O / G, I, k...] when grouped (the same
/// row-major bytes).
Shape weights_shape(const Shape& w, int64_t groups) {
    if (groups == 1) return w;
    Shape s{groups, w[0] / groups};
    s.insert(s.end(), w.begin() + 1, w.end());
    return s;
}

memory::dims minus_one(const std::vector<int64_t>& v) {
    memory::dims d;
    for (int64_t x : v) d.push_back(x - 1); // oneDNN counts dilation from 0
    return d;
}

} // namespace

/// conv_backward_filter on one chunk: `units` images of the batch, or `units` units of the output
/// channels of a batch of one (Note [Weight gradients of a batch of one]); a primitive planned for
/// one thread (Note [Thread-count-independent weight gradients]).
struct FilterChunk {
    int64_t units = 0;
    dnnl::primitive prim;
    memory::desc src, diff_dst;
    /// cut by outputs: the chunk's gradient in the primitive's layout, and for each of its
    /// elements its offset from the chunk's first element in the caller's layout (-1: padding),
    /// or empty when the layouts are the same (the primitive then writes the caller's buffer)
    memory::desc diff_weights;
    std::vector<int32_t> to_user;
};

/// conv_backward_filter's chunks: units [units * c / count, units * (c + 1) / count) for
/// c < count, of at most two sizes, one primitive per size. The units are the batch's images
/// (their partial gradients summed), or for a batch of one `by_outputs` units of its output
/// channels (each chunk computes its own rows of the gradient, nothing is summed).
struct FilterChunks {
    int64_t units = 0;
    int count = 0;
    bool by_outputs = false;
    bool unit_calls = false; // by outputs: one primitive call per unit (a group), sizes[0]'s
    std::vector<FilterChunk> sizes;
    memory::desc src, diff_dst; // the layouts of the whole x and dy, which the chunks slice
    memory::desc diff_weights;  // by images: the layout of every partial gradient, and of the sum
    size_t scratch = 0;        // the largest scratchpad of a chunk's primitive
    // the bytes of one unit in the chunks' layout of x and dy: an image's; by outputs, a unit's
    // input channels (0 when the chunks all read the whole of x: no groups) and output channels
    size_t src_unit_bytes = 0, diff_dst_unit_bytes = 0;
    int64_t weights_unit = 0; // by outputs: the gradient's elements of one unit
    size_t partial_bytes = 0; // by outputs: the largest chunk gradient a task keeps
    int tasks = 1; // threads that run chunks (each has its own scratchpad)
    std::string impl;
    // by images: for each element of diff_weights, its offset in the caller's layout, or -1
    // (padding); empty when the sum is reordered instead (Note [Weight gradients stored in the
    // caller's layout])
    std::vector<int32_t> user_offset;
};

/// One argument of a primitive: where its buffer comes from, the plain layout of our buffer and
/// the layout the primitive wants; when they differ the call reorders through a temporary.
struct WindowArg {
    int id;      // DNNL_ARG_*
    int operand; // index of the op's input, or -1 for the output
    memory::desc user, prim;
    dnnl::reorder reorder; // user -> prim (inputs) or prim -> user (the output); empty if equal
    // the output of a call with a sum post-op: user -> prim, the value it adds to (Note
    // [Accumulating post-op] in src/compiler/Fusion.cpp)
    dnnl::reorder reorder_in;
};

struct WindowPrimitive {
    dnnl::primitive main;
    std::vector<WindowArg> args;
    memory::desc scratch, workspace;
    // max-pool backward: the forward pass that computes the workspace (Note [Max-pool workspace])
    dnnl::primitive forward;
    memory::desc forward_src, forward_dst, forward_scratch;
    std::vector<compiler::PostOp> epilogue; // applied in the call (conv only)
    ChannelDim channel;                     // where its per-channel operands vary
    // the epilogue's first `affine` steps are the bias and weight scales (Note [Affine prefix])
    size_t affine = 0;
    bool scale_weights = false;
    /// a Winograd conv: its weights, in oneDNN's Winograd layout, are kept between calls
    /// (Note [Winograd convolutions])
    bool keep_weights = false;
    memory::desc bias, weights_user;
    std::unique_ptr<const FilterChunks> filter; // conv_backward_filter (p.main is empty)
    /// planned for and run on the calling thread (Note [Small pools on one thread])
    bool one_thread = false;
    std::string impl;      // oneDNN's implementation name (SJ_DEBUG >= 3)
    size_t temp_bytes = 0; // the temporaries of one call
};

namespace {

dnnl::primitive_attr user_scratchpad() {
    // each call brings its scratchpad: primitives can then run from several threads at once
    dnnl::primitive_attr a;
    a.set_scratchpad_mode(dnnl::scratchpad_mode::user);
    return a;
}

// Note [Small reorders on one thread]
// A training step reorders every convolution's weights between our plain layout and the
// primitives' blocked ones: to the forward's and the backward-data's layouts, and the weight
// gradient back, 23 reorders a step in the SymJAX paper's network, all of 36 KB or less. oneDNN
// fixes a reorder's thread count when it is made (jit_uni_reorder's nthr_, in its pd) and runs
// it in a parallel region of that many threads, whose fork and join cost more than the copy: on
// the AMD EPYC (Zen 5, 2 threads) a 32x32x3x3 reorder took 6.3 us on hot data planned for two
// threads and 2.8 us planned for one (a loop, 1.5 us), and inside the paper network's step
// (weights cold after the activations streamed through the caches) 9-11 us against 6-7 on one.
// So a reorder of at most kSmallReorder bytes is made with OneDnnlThread: planned for, and run
// on, the calling thread. oneDNN's primitive cache keys on the thread count, so the two kinds
// do not mix.
constexpr size_t kSmallReorder = size_t(1) << 17;

dnnl::reorder make_reorder(const memory::desc& from, const memory::desc& to) {
    const auto& e = dnnl_engine();
    std::optional<OneDnnlThread> one;
    if (from.get_size() <= kSmallReorder && to.get_size() <= kSmallReorder)
        one.emplace();
    return dnnl::reorder(dnnl::reorder::primitive_desc(e, from, e, to));
}

void add_arg(WindowPrimitive& p, int id, int operand, const memory::desc& user,
             const memory::desc& prim, bool accumulates = false) {
    WindowArg a{id, operand, user, prim, {}, {}};
    if (!(user == prim)) {
        a.reorder = operand >= 0 ? make_reorder(user, prim) : make_reorder(prim, user);
        if (operand < 0 && accumulates)
            a.reorder_in = make_reorder(user, prim);
    }
    p.args.push_back(std::move(a));
}

/// The layouts a convolution primitive is asked for (Note [Conv layouts]).
enum class Layout : uint8_t { Blocked, Plain };

/// nC(d)hw<B>c for the logical shape [N, C, spatial...] (C a multiple of B = 8 or 16): the
/// buffer of a [N, C / B, spatial..., B] tensor (Note [Channel-blocked layout]).
memory::desc blocked(const Shape& s, int64_t B) {
    using tag = memory::format_tag;
    tag t = B == 8 ? (s.size() == 3   ? tag::aBc8b
                      : s.size() == 4 ? tag::aBcd8b
                                      : tag::aBcde8b)
                   : (s.size() == 3   ? tag::aBc16b
                      : s.size() == 4 ? tag::aBcd16b
                                      : tag::aBcde16b);
    return memory::desc(dims_of(s), dt::f32, t);
}

/// Our buffer of an operand of logical shape s: blocked by `block`, or plain row-major (0).
memory::desc user(const Shape& s, int64_t block) {
    return block ? blocked(s, block) : plain(s);
}

/// An activation [N, C, spatial...] as a primitive is asked for it: in the CPU's channel blocks
/// when C fills them (the first layer's 3 channels stay plain: oneDNN has direct kernels for a
/// plain source), else plain.
memory::desc activation(const Shape& s, Layout l) {
    const int64_t B = isa_channel_block();
    if (l == Layout::Plain || s[1] % B != 0)
        return plain(s);
    return blocked(s, B);
}

/// The logical ([N, C, spatial...]) shapes of a window op's operands and which are blocked.
struct Operands {
    std::vector<Shape> in;
    Shape out;
    int64_t mask = 0;
    /// The channel block of input i or the result (0: plain).
    int64_t in_block(size_t i) const {
        return mask & (int64_t(1) << i) ? detail::block_width(mask) : 0;
    }
    int64_t out_block() const {
        return mask & detail::kBlockedResult ? detail::block_width(mask) : 0;
    }
};

Operands logical_operands(const Node& n, const std::vector<TensorType>& in,
                          const TensorType& out) {
    Operands o;
    o.mask = detail::blocked_mask(n);
    for (size_t i = 0; i < in.size(); ++i)
        o.in.push_back(o.in_block(i) ? detail::unblocked_shape(in[i].shape) : in[i].shape);
    o.out = o.out_block() ? detail::unblocked_shape(out.shape) : out.shape;
    return o;
}

struct ConvDescs {
    memory::desc src, weights, dst;                // what the primitives are asked for
    memory::desc src_user, weights_user, dst_user; // our buffers
    memory::dims strides, dilates, lo, hi;
};

/// x_block, y_block: the channel blocks of our buffers of x and y (0: plain).
ConvDescs conv_descs(const Shape& x, const Shape& w, const Shape& y, const ConvAttrs& a, Layout l,
                     int64_t x_block = 0, int64_t y_block = 0) {
    Shape ws = weights_shape(w, a.groups);
    ConvDescs d;
    d.src_user = user(x, x_block);
    d.weights_user = plain(ws);
    d.dst_user = user(y, y_block);
    d.src = activation(x, l);
    d.weights = l == Layout::Blocked ? any(ws) : d.weights_user;
    d.dst = activation(y, l);
    d.strides = dims_of(a.strides);
    d.dilates = minus_one(a.dilation);
    d.lo = dims_of(a.pad_lo);
    d.hi = dims_of(a.pad_hi);
    return d;
}

/// The primitive descriptor make(layout) of the first layout oneDNN has a fast implementation
/// for: blocked, else plain (a reference implementation is taken only as the last resort).
template <class Make> auto first_fast(Make&& make) -> decltype(make(Layout::Plain)) {
    try {
        auto pd = make(Layout::Blocked);
        if (std::string(pd.impl_info_str()).find("ref") == std::string::npos) return pd;
    } catch (const dnnl::error&) {
        // no implementation takes these layouts (e.g. 8 channels per group): try ours
    }
    return make(Layout::Plain);
}

// Note [Winograd convolutions]
// oneDNN has Winograd kernels for f32 3x3 convolutions on AVX-512 (F(4x4, 3x3), and F(2x2, 3x3)
// for a single image): on this project's 2-core AVX-512 EPYC they ran the CNN benchmarks' 3x3
// layers 1.4-2.1x faster than the direct kernels at batch 32 and maps of 8x8 to 32x32, and
// slower at 4x4 and for one image at 8x8 or less (a standalone oneDNN harness; docs/performance.md,
// "Shared normalisation sums and Winograd inference"). So a forward convolution whose shapes have
// them runs as Winograd: f32, one group, a 3x3 kernel, stride and dilation 1, channels in the CPU's
// 16-channel blocks on both sides and at least 32 of them (kMinWinogradChannels, "Channels"
// below), an output of at least 8x8 (kMinWinogradSide). The rule reads the
// shapes alone. oneDNN's own choice (convolution_auto) was tried and is not used: it picked
// Winograd for a 64-channel 8x8 layer with one thread and the direct kernel with two, and 1 and 2
// threads must give the same bits (Note [Thread-count-independent weight gradients]); the Winograd
// kernels themselves gave the same bits with 1 and 2 threads on every shape tried
// (Determinism.OneAndTwoThreadsGiveTheSameBits runs such layers). Where oneDNN has no Winograd
// kernel for the shapes, the CPU or the post-ops, the direct one runs. Winograd rounds
// differently: its outputs differed from the direct kernel's by up to 2e-6 of the largest output
// (|y| ~ 10, 3x3x64 taps), a few ulp of f32 more than a direct sum. SJ_WINOGRAD=0 turns it off
// (the direct kernels' bits).
//
// Training. With weights the function updates, Winograd's own weight layout (format 'any') costs
// a reorder of ~0.23 ms every call, which made training's forward convolutions slower (measured
// 2026-12-04). But given 16x16-blocked weights (OIhw16i16o), oneDNN's Winograd kernels transform
// them inside the call, cheaply: so a forward convolution whose weights change, and every
// backward-data convolution (whose weights are the forward's), run as Winograd on blocked weights
// when the shapes rule above holds and the output is at least 16x16 (kMinTrainingWinogradSide:
// at 8x8 with 32 channels a standalone call was no faster, 0.106 against 0.108 ms forward, 0.109
// against 0.104 backward). Weight gradients stay direct, in their fixed one-thread chunks (Note
// [Thread-count-independent weight gradients]). Measured on the AMD EPYC (Zen 5, 2 threads,
// docs/performance.md, "Winograd in training"): the paper network's 16x16 convolutions 0.38-0.40
// -> 0.30-0.32 ms a call in its step; training steps 1.06x (paper network, batch 32), 1.19x
// (brief, 32 and 128) as fast. The bits stay the same for 1 and 2 threads
// (Determinism.OneAndTwoThreadsGiveTheSameBits trains such a layer).
//
// Channels. With 16 channels on either side the transforms outweigh the smaller products. On
// the AMD EPYC (Zen 5, 2 threads; `bench/run winograd_channels`, inference, batch 32), Winograd
// took 1.11-2.01x the direct kernel's time with 16 channels on a side (16->16, 16->32, 16->64 at
// 32x32 and 16x16), 1.01x at 32->16, and 0.57-0.94x with 32 or more on both (32->32, 32->64,
// 64->64 at 8x8 to 32x32). In a vmap'd CNN's gradients (16->32 at 32x32, batch 64) the forward
// took 2.8 ms against 1.9 direct and the backward data 2.7 against 2.1. So both sides need at
// least kMinWinogradChannels (docs/performance.md, "Winograd needs 32 channels a side").
constexpr int64_t kMinWinogradSide = 8;
constexpr int64_t kMinTrainingWinogradSide = 16;
constexpr int64_t kMinWinogradChannels = 32;

/// SJ_WINOGRAD: 0 keeps the direct kernels; "all" drops the channel minimum (for
/// python/bench/winograd_channels.py, which measures it); anything else, or unset, the rule.
enum class WinogradMode { Off, Rule, All };
WinogradMode winograd_mode() {
    static const WinogradMode m = [] {
        const char* e = std::getenv("SJ_WINOGRAD");
        if (e && std::strcmp(e, "0") == 0)
            return WinogradMode::Off;
        return e && std::strcmp(e, "all") == 0 ? WinogradMode::All : WinogradMode::Rule;
    }();
    return m;
}

/// Whether a forward convolution of these logical shapes runs as Winograd (Note [Winograd
/// convolutions]).
bool winograd_shapes(const Shape& x, const Shape& w, const Shape& y, const ConvAttrs& a) {
    const WinogradMode mode = winograd_mode();
    if (mode == WinogradMode::Off || isa_channel_block() != 16 || a.groups != 1 || x.size() != 4 ||
        w.size() != 4 || w[2] != 3 || w[3] != 3 || x[1] % 16 != 0 || y[1] % 16 != 0)
        return false;
    if (mode == WinogradMode::Rule && (x[1] < kMinWinogradChannels || y[1] < kMinWinogradChannels))
        return false;
    for (size_t i = 0; i < 2; ++i)
        if (a.strides[i] != 1 || a.dilation[i] != 1 || y[2 + i] < kMinWinogradSide)
            return false;
    return true;
}

/// Whether a convolution whose weights change between calls (training's forward, and every
/// backward-data convolution) runs as Winograd, transforming its weights inside each call (Note
/// [Winograd convolutions]): the forward's shape rule, and an output of at least 16x16.
bool winograd_training_shapes(const Shape& x, const Shape& w, const Shape& y, const ConvAttrs& a) {
    return winograd_shapes(x, w, y, a) && y[2] >= kMinTrainingWinogradSide &&
           y[3] >= kMinTrainingWinogradSide;
}

/// The weights a per-call Winograd primitive is asked for: 16x16-blocked, which its kernels
/// transform themselves (the 'any' layout is Winograd's own, a reorder of 0.23 ms a call).
memory::desc winograd_training_weights(const ConvDescs& d) {
    return memory::desc(d.weights.dims(), dt::f32, memory::format_tag::OIhw16i16o);
}

/// make()'s primitive descriptor when oneDNN gives it a Winograd kernel; none otherwise (no
/// kernel for these shapes, post-ops or CPU: the caller plans the usual direct one, so a declined
/// Winograd never leaves a convolution on blocked weights its direct kernel does not take).
template <class Make> auto per_call_winograd(Make&& make) -> std::optional<decltype(make())> {
    try {
        auto pd = make();
        if (winograd_impl(pd.impl_info_str()))
            return pd;
    } catch (const dnnl::error&) {
        // declined: the direct kernel
    }
    return std::nullopt;
}

dnnl::convolution_forward::primitive_desc conv_forward_pd(const ConvDescs& d, dnnl::prop_kind pk,
                                                          const dnnl::primitive_attr& attr,
                                                          const memory::desc& bias = {},
                                                          bool winograd = false) {
    auto make = [&](dnnl::algorithm alg) {
        auto desc = bias.get_size()
                        ? dnnl::convolution_forward::desc(pk, alg, d.src, d.weights, bias, d.dst,
                                                          d.strides, d.dilates, d.lo, d.hi)
                        : dnnl::convolution_forward::desc(pk, alg, d.src, d.weights, d.dst,
                                                          d.strides, d.dilates, d.lo, d.hi);
        return dnnl::convolution_forward::primitive_desc(desc, attr, dnnl_engine());
    };
    if (winograd) {
        try {
            return make(dnnl::algorithm::convolution_winograd);
        } catch (const dnnl::error&) {
            // no Winograd kernel for these shapes, CPU or post-ops: the direct one
        }
    }
    return make(dnnl::algorithm::convolution_direct);
}

// Note [Weight gradients stored in the caller's layout]
// The partial weight gradients are in the primitive's blocked layout (OIhw16i16o-like), and so
// was their sum, which a oneDNN reorder then copied into our plain buffer: 7 of the 23 small
// reorders of the SymJAX paper network's training step (Note [Small reorders on one thread]).
// The sum now stores each element straight at its place in the caller's layout: user_offsets
// gives, per element of the blocked layout, its offset in the plain one (-1 for the blocked
// layout's padding, e.g. 10 output channels in blocks of 16), made once per primitive by
// reordering a buffer that holds each element's own offset + 1. Offsets as float are exact
// below 2^24 elements; a larger weight keeps the reorder.
std::vector<int32_t> user_offsets(const memory::desc& user, const memory::desc& prim) {
    if (user == prim)
        return {};
    const size_t n = user.get_size() / sizeof(float), m = prim.get_size() / sizeof(float);
    if (n >= (size_t(1) << 24) || m >= (size_t(1) << 31))
        return {};
    std::vector<float> in(n), out(m, 0.0f);
    for (size_t i = 0; i < n; ++i)
        in[i] = float(i + 1);
    const auto& e = dnnl_engine();
    memory from(user, e, in.data()), to(prim, e, out.data());
    dnnl::stream s(e);
    make_reorder(user, prim).execute(s, from, to);
    s.wait();
    std::vector<int32_t> offsets(m);
    for (size_t j = 0; j < m; ++j)
        offsets[j] = int32_t(out[j]) - 1;
    return offsets;
}

/// The primitive of conv_backward_filter (x, dy) -> dw planned for one thread, weights in
/// `weights`' layout or, when null, the primitive's choice.
dnnl::convolution_backward_weights::primitive_desc filter_pd(const Shape& x, const Shape& w,
                                                             const Shape& y, const ConvAttrs& a,
                                                             Layout l,
                                                             const memory::desc* weights) {
    ConvDescs d = conv_descs(x, w, y, a, l);
    if (weights)
        d.weights = *weights;
    auto hint = conv_forward_pd(d, dnnl::prop_kind::forward_training, dnnl::primitive_attr());
    dnnl::convolution_backward_weights::desc desc(dnnl::algorithm::convolution_direct, d.src,
                                                  d.weights, d.dst, d.strides, d.dilates, d.lo,
                                                  d.hi);
    return dnnl::convolution_backward_weights::primitive_desc(desc, user_scratchpad(),
                                                              dnnl_engine(), hint);
}

/// Adds the primitive of chunks of `units` units to f.
void add_chunk(FilterChunks& f, int64_t units,
               const dnnl::convolution_backward_weights::primitive_desc& pd) {
    f.sizes.push_back({units,
                       dnnl::convolution_backward_weights(pd),
                       pd.src_desc(),
                       pd.diff_dst_desc(),
                       pd.diff_weights_desc(),
                       {}});
    f.scratch = std::max(f.scratch, pd.scratchpad_desc().get_size());
}

/// conv_backward_filter (x, dy) -> dw for the whole batch as fixed chunks (Note
/// [Thread-count-independent weight gradients]).
std::unique_ptr<FilterChunks> make_filter_chunks(const Shape& x, const Shape& w, const Shape& y,
                                                 const ConvAttrs& a) {
    OneDnnlThread one; // planned for one thread: the chunks run inside our parallel region
    auto f = std::make_unique<FilterChunks>();
    f->units = x[0];
    // y is [N, C, spatial...] (logical_operands)
    f->count = int(filter_chunk_count(
        x[0], std::accumulate(y.begin() + 2, y.end(), int64_t{1}, std::multiplies<>())));
    auto pd_for = [&](int64_t images, Layout l, const memory::desc* weights) {
        Shape xc = x, yc = y;
        xc[0] = yc[0] = images;
        return filter_pd(xc, w, yc, a, l, weights);
    };
    const int64_t small = f->units / f->count;
    // first_fast returns the descriptor of the last layout it tried
    Layout layout = Layout::Plain;
    auto pd = first_fast([&](Layout l) {
        layout = l;
        return pd_for(small, l, nullptr);
    });
    f->diff_weights = pd.diff_weights_desc();
    f->impl = pd.impl_info_str();
    add_chunk(*f, small, pd);
    if (f->units % f->count)
        add_chunk(*f, small + 1, pd_for(small + 1, layout, &f->diff_weights));
    f->src = activation(x, layout);
    f->diff_dst = activation(y, layout);
    f->src_unit_bytes = f->src.get_size() / size_t(f->units);
    f->diff_dst_unit_bytes = f->diff_dst.get_size() / size_t(f->units);
    for (const FilterChunk& c : f->sizes)
        SJ_ASSERT(c.src.get_size() == f->src_unit_bytes * size_t(c.units) &&
                  c.diff_dst.get_size() == f->diff_dst_unit_bytes * size_t(c.units))
            << "conv_backward_filter: a chunk's layout is not a piece of the batch's";
    f->tasks = std::min(f->count, ThreadPool::get().threads());
    return f;
}

// Note [Weight gradients of a batch of one]
// The chunks of Note [Thread-count-independent weight gradients] cut the batch, so a batch of one
// ran on one thread: vmap's per-example weight gradients (one grouped conv_backward_filter with
// the examples in the groups and a batch of one: src/ops/Conv.cpp's batch_conv_backward_filter),
// and any one image's gradient (a loop over examples, a batch-1 step). Such a call now cuts its
// output channels instead. A unit's rows of the gradient read only its own output
// channels of dy and, with groups, its own groups' input channels of x; with a batch of one
// these are contiguous pieces of both buffers. The cuts, tried in order (make_output_chunks):
//   - blocked: units of whole channel blocks (isa_channel_block()) in the blocked layout; with
//     groups, as many groups a unit as make its input and output channels whole blocks;
//   - with groups, one call per group of a primitive without groups, on a blocked piece where a
//     group's channels are whole blocks and a plain one where not (vmap's first layer: 3 input
//     channels an example). oneDNN has no direct kernel for groups of 3 channels and ran a
//     grouped GEMM instead: 64 examples of [3, 32, 32] to 16 channels took 4.2 ms at 2 threads,
//     the calls per group 0.3 ms;
//   - units of single groups (or blocks) in the plain layout.
// Each chunk runs primitives planned for one thread over its units and writes its own rows of the
// gradient, at their places in the caller's layout: nothing is summed, and each element is
// computed by one primitive whatever the thread count, so the bits do not depend on it. The
// count is a function of the shapes alone: at most kFilterChunks and one chunk per kChunkMacs
// multiply-adds of the whole gradient (a primitive call costs microseconds; below two chunks'
// worth the call stays whole, on one thread).
constexpr int64_t kChunkMacs = int64_t(1) << 20;

/// The ways a batch of one is cut (Note [Weight gradients of a batch of one]), in the order they
/// are tried: units of blocks in the blocked layout; with groups, one call per group of a
/// primitive without groups; units in the plain layout.
enum class OutputCut : uint8_t { Blocked, GroupCalls, Plain };

/// conv_backward_filter of a batch of one cut along its output channels (Note [Weight gradients
/// of a batch of one]), or null when the shapes do not allow two chunks.
std::unique_ptr<FilterChunks> make_output_chunks(const Shape& x, const Shape& w, const Shape& y,
                                                 const ConvAttrs& a) {
    if (x[0] != 1 || numel(y) == 0 || numel(w) == 0)
        return nullptr;
    const int64_t G = a.groups, C = x[1], O = y[1], Cg = C / G, Og = O / G, B = isa_channel_block();
    const int64_t per_output = numel(w) / O;    // an output channel's weights: C / G x k...
    const int64_t macs = per_output * numel(y); // (a batch of one: y holds O x positions)
    OneDnnlThread one; // planned for one thread: the chunks run inside our parallel region
    for (OutputCut cut : {OutputCut::Blocked, OutputCut::GroupCalls, OutputCut::Plain}) {
        if (cut == OutputCut::GroupCalls && G == 1)
            continue;
        const Layout l = cut == OutputCut::Plain ? Layout::Plain : Layout::Blocked;
        // a unit: `per` groups, or `per` output channels without groups
        const int64_t per = G == 1 ? B
                            : cut == OutputCut::Blocked
                                ? std::lcm(B / std::gcd(Cg, B), B / std::gcd(Og, B))
                                : 1;
        if ((G == 1 ? O : G) % per != 0)
            continue;
        auto f = std::make_unique<FilterChunks>();
        f->by_outputs = true;
        f->unit_calls = cut == OutputCut::GroupCalls;
        f->units = (G == 1 ? O : G) / per;
        f->count = int(std::min({f->units, kFilterChunks, macs / kChunkMacs}));
        if (f->count < 2)
            continue; // (too little work, or one unit: plain units may be smaller)
        // the layouts of the whole x and dy that the chunks read pieces of: one group's channels
        // are a piece of a blocked buffer when they are whole blocks
        f->src =
            cut == OutputCut::GroupCalls ? (Cg % B ? plain(x) : blocked(x, B)) : activation(x, l);
        f->diff_dst =
            cut == OutputCut::GroupCalls ? (Og % B ? plain(y) : blocked(y, B)) : activation(y, l);
        const int64_t unit_out = G == 1 ? per : per * Og; // output channels of a unit
        // the shapes and attributes of one primitive call on u units
        auto call = [&](int64_t u, Shape& xc, Shape& wc, Shape& yc, ConvAttrs& ac) {
            xc = x, wc = w, yc = y, ac = a;
            yc[1] = wc[0] = u * unit_out;
            if (G > 1)
                xc[1] = u * per * Cg, ac.groups = u * per;
        };
        const int64_t small = f->units / f->count;
        // the units of a call: a chunk's (of two sizes at most), or one group
        std::vector<int64_t> sizes{f->unit_calls ? 1 : small};
        if (!f->unit_calls && f->units % f->count)
            sizes.push_back(small + 1);
        for (int64_t u : sizes) {
            Shape xc, wc, yc;
            ConvAttrs ac;
            call(u, xc, wc, yc, ac);
            try {
                auto pd = filter_pd(xc, wc, yc, ac, l, nullptr);
                if (cut != OutputCut::Plain &&
                    std::string(pd.impl_info_str()).find("ref") != std::string::npos)
                    break; // a reference kernel: try the next cut (first_fast's rule)
                add_chunk(*f, u, pd);
                if (u == sizes[0])
                    f->impl = pd.impl_info_str();
            } catch (const dnnl::error&) {
                break; // no implementation takes these layouts
            }
            FilterChunk& k = f->sizes.back();
            const memory::desc user = plain(weights_shape(wc, ac.groups));
            if (!(user == k.diff_weights)) {
                k.to_user = user_offsets(user, k.diff_weights);
                if (k.to_user.empty())
                    return nullptr; // too large to map
                f->partial_bytes = std::max(f->partial_bytes, k.diff_weights.get_size());
            }
        }
        if (f->sizes.size() != sizes.size())
            continue;
        f->src_unit_bytes = G == 1 ? 0 : f->src.get_size() / size_t(f->units);
        f->diff_dst_unit_bytes = f->diff_dst.get_size() / size_t(f->units);
        f->weights_unit = unit_out * per_output;
        for (const FilterChunk& c : f->sizes)
            SJ_ASSERT((G == 1 ? c.src.get_size() == f->src.get_size()
                              : c.src.get_size() == f->src_unit_bytes * size_t(c.units)) &&
                      c.diff_dst.get_size() == f->diff_dst_unit_bytes * size_t(c.units))
                << "conv_backward_filter: a chunk's layout is not a piece of the output channels'";
        f->tasks = std::min(f->count, ThreadPool::get().threads());
        return f;
    }
    return nullptr;
}

std::shared_ptr<WindowPrimitive> make_conv(const Node& n, const Operands& o,
                                           const std::vector<compiler::PostOp>& epilogue,
                                           bool fixed_weights) {
    // the group count fixed by the forward input's channels (Note [Groups that follow the batch]
    // in src/ops/Conv.cpp)
    const ConvAttrs a =
        with_groups(n.attr<ConvAttrs>(), n.is(Op::ConvBackwardData) ? o.out[1] : o.in[0][1]);
    auto p = std::make_shared<WindowPrimitive>();
    dnnl::primitive_attr attr = user_scratchpad();
    switch (n.op()) {
    case Op::Conv: {
        const Shape &x = o.in[0], &w = o.in[1], &y = o.out;
        // the epilogue's per-channel operands are [1, C, 1...] whatever our buffer's layout
        p->epilogue = epilogue;
        // The cache keeps the primitive after the function that made it is gone, and other
        // graphs of the same shapes reuse it: it keeps none of this graph's nodes, which would
        // keep the whole graph alive, its variables' values included. A call passes the
        // operands' values (post_operands); the nodes are the compiler's.
        for (compiler::PostOp& q : p->epilogue)
            q.operand.reset(), q.node.reset();
        p->channel = {int(y.size()), 1, y[1]};
        p->affine = affine_prefix(epilogue, true);
        for (size_t i = 0; i < p->affine; ++i)
            p->scale_weights = p->scale_weights || epilogue[i].op == Op::Mul ||
                               (epilogue[i].kind == compiler::PostOp::Kind::Linear &&
                                epilogue[i].alpha != 1);
        if (p->affine) p->bias = memory::desc({y[1]}, dt::f32, memory::format_tag::a);
        dnnl::primitive_attr conv_attr = user_scratchpad();
        set_post_ops(conv_attr, epilogue, p->channel, p->affine);
        // Winograd with weights the function updates: oneDNN transforms blocked weights inside
        // the call (Note [Winograd convolutions])
        const bool per_call = !fixed_weights && winograd_training_shapes(x, w, y, a);
        std::optional<dnnl::convolution_forward::primitive_desc> wino;
        if (per_call)
            wino = per_call_winograd([&] {
                ConvDescs cd = conv_descs(x, w, y, a, Layout::Blocked);
                cd.weights = winograd_training_weights(cd);
                return conv_forward_pd(cd, dnnl::prop_kind::forward_training, conv_attr, p->bias,
                                       true);
            });
        auto pd = wino ? *wino : first_fast([&](Layout l) {
            return conv_forward_pd(
                conv_descs(x, w, y, a, l), dnnl::prop_kind::forward_inference, conv_attr, p->bias,
                fixed_weights && l == Layout::Blocked && winograd_shapes(x, w, y, a));
        });
        ConvDescs d = conv_descs(x, w, y, a, Layout::Plain, o.in_block(0), o.out_block());
        if (p->scale_weights) p->weights_user = d.weights_user;
        p->main = dnnl::convolution_forward(pd);
        add_arg(*p, DNNL_ARG_SRC, 0, d.src_user, pd.src_desc());
        add_arg(*p, DNNL_ARG_WEIGHTS, 1, d.weights_user, pd.weights_desc());
        add_arg(*p, DNNL_ARG_DST, -1, d.dst_user, pd.dst_desc(),
                compiler::sum_post_op(epilogue) != nullptr);
        p->scratch = pd.scratchpad_desc();
        p->impl = pd.impl_info_str();
        // (weights in Winograd's own layout: a reorder worth keeping while they are unchanged)
        p->keep_weights = !wino && winograd_impl(p->impl);
        break;
    }
    case Op::ConvBackwardData: { // (dy, w) -> dx
        const Shape &x = o.out, &w = o.in[1], &y = o.in[0];
        auto make = [&](Layout l, bool wino) {
            ConvDescs d = conv_descs(x, w, y, a, l);
            if (wino)
                d.weights = winograd_training_weights(d);
            auto hint = conv_forward_pd(d, dnnl::prop_kind::forward_training,
                                        dnnl::primitive_attr(), {}, wino);
            dnnl::convolution_backward_data::desc desc(
                wino ? dnnl::algorithm::convolution_winograd : dnnl::algorithm::convolution_direct,
                d.src, d.weights, d.dst, d.strides, d.dilates, d.lo, d.hi);
            return dnnl::convolution_backward_data::primitive_desc(desc, attr, dnnl_engine(), hint);
        };
        std::optional<dnnl::convolution_backward_data::primitive_desc> wino;
        if (winograd_training_shapes(x, w, y, a))
            wino = per_call_winograd([&] { return make(Layout::Blocked, true); });
        auto pd = wino ? *wino : first_fast([&](Layout l) { return make(l, false); });
        ConvDescs d = conv_descs(x, w, y, a, Layout::Plain, o.out_block(), o.in_block(0));
        p->main = dnnl::convolution_backward_data(pd);
        add_arg(*p, DNNL_ARG_DIFF_DST, 0, d.dst_user, pd.diff_dst_desc());
        add_arg(*p, DNNL_ARG_WEIGHTS, 1, d.weights_user, pd.weights_desc());
        add_arg(*p, DNNL_ARG_DIFF_SRC, -1, d.src_user, pd.diff_src_desc());
        p->scratch = pd.scratchpad_desc();
        p->impl = pd.impl_info_str();
        break;
    }
    case Op::ConvBackwardFilter: { // (x, dy) -> dw over fixed chunks of the batch or outputs
        const Shape &x = o.in[0], &w = o.out, &y = o.in[1];
        std::unique_ptr<FilterChunks> f = make_output_chunks(x, w, y, a);
        if (!f)
            f = make_filter_chunks(x, w, y, a);
        ConvDescs d = conv_descs(x, w, y, a, Layout::Plain, o.in_block(0), o.in_block(1));
        add_arg(*p, DNNL_ARG_SRC, 0, d.src_user, f->src);
        add_arg(*p, DNNL_ARG_DIFF_DST, 1, d.dst_user, f->diff_dst);
        if (!f->by_outputs)
            f->user_offset = user_offsets(d.weights_user, f->diff_weights);
        // the chunks (by outputs) or the sum store into the caller's buffer, or the sum into a
        // temporary that is reordered
        add_arg(*p, DNNL_ARG_DIFF_WEIGHTS, -1, d.weights_user,
                f->by_outputs || !f->user_offset.empty() ? d.weights_user : f->diff_weights);
        p->filter = std::move(f);
        p->impl = p->filter->impl + " on " + std::to_string(p->filter->count) +
                  (p->filter->by_outputs ? " chunks of its output channels" : " chunks");
        break;
    }
    // the pools and reorders have their own builders (make_pool, make_reblock)
    case Op::Pool:
    case Op::MaxPoolBackward:
    case Op::AvgPoolBackward:
    case Op::BlockChannels:
    case Op::UnblockChannels:
#define SJ_CASES_OUTSIDE_Window
#include "ops/OpCasesOutside.inc" // Note [Family switches]
        SJ_ASSERT(false) << "make_conv on " << op_name(n.op());
    }
    return p;
}

dnnl::algorithm pool_algorithm(const PoolAttrs& a) {
    if (a.kind == PoolKind::Max) return dnnl::algorithm::pooling_max;
    return a.count_include_pad ? dnnl::algorithm::pooling_avg_include_padding
                               : dnnl::algorithm::pooling_avg_exclude_padding;
}

/// Pools run on our buffers' layouts, plain or blocked (oneDNN pools both directly).
dnnl::pooling_forward::primitive_desc pool_forward_pd(const PoolAttrs& a,
                                                      const memory::desc& x,
                                                      const memory::desc& y, dnnl::prop_kind pk,
                                                      const dnnl::primitive_attr& attr) {
    dnnl::pooling_forward::desc desc(pk, pool_algorithm(a), x, y, dims_of(a.strides),
                                     dims_of(a.window), dims_of(a.pad_lo), dims_of(a.pad_hi));
    return dnnl::pooling_forward::primitive_desc(desc, attr, dnnl_engine());
}

// Note [Small pools on one thread]
// oneDNN's pooling runs on every thread of the team whatever its size, and a parallel region
// costs a few microseconds (Note [Parallel work threshold] in CpuExecutable.cpp), more than
// pooling a small map: the SymJAX paper network's three pools took 0.011, 0.008 and 0.007 ms
// of a 0.19 ms inference call at batch 1 (AMD EPYC, 2 threads). A pool or pooling backward
// whose operands and result move at most kSmallPool bytes, the threshold our own kernels split
// at, is planned for and runs on the
// calling thread (OneDnnlThread), as small reorders do (Note [Small reorders on one thread]).
// Pooling computes each output from its own window, so the bits do not depend on the threads.
constexpr size_t kSmallPool = size_t(1) << 20;

std::shared_ptr<WindowPrimitive> make_pool(const Node& n, const Operands& o, bool keep_workspace) {
    const auto& a = n.attr<PoolAttrs>();
    auto p = std::make_shared<WindowPrimitive>();
    dnnl::primitive_attr attr = user_scratchpad();
    memory::desc out = user(o.out, o.out_block());
    size_t bytes = out.get_size();
    for (size_t i = 0; i < o.in.size(); ++i)
        bytes += user(o.in[i], o.in_block(i)).get_size();
    std::optional<OneDnnlThread> one;
    if (bytes <= kSmallPool) {
        one.emplace();
        p->one_thread = true;
    }
    if (n.is(Op::Pool)) {
        memory::desc x = user(o.in[0], o.in_block(0));
        // training mode writes the workspace its backward reads (Note [Max-pool workspace])
        auto pk = keep_workspace ? dnnl::prop_kind::forward_training : dnnl::prop_kind::forward_inference;
        auto pd = pool_forward_pd(a, x, out, pk, attr);
        p->main = dnnl::pooling_forward(pd);
        add_arg(*p, DNNL_ARG_SRC, 0, x, pd.src_desc());
        add_arg(*p, DNNL_ARG_DST, -1, out, pd.dst_desc());
        p->scratch = pd.scratchpad_desc();
        if (keep_workspace) p->workspace = pd.workspace_desc();
        p->impl = pd.impl_info_str();
        return p;
    }
    // max: (x, dy) -> dx; avg: (dy[, like]) -> dx. The forward (the hint, and max pooling's
    // workspace pass) reads x in dx's layout.
    bool max = n.is(Op::MaxPoolBackward);
    size_t dyi = max ? 1 : 0;
    memory::desc dy = user(o.in[dyi], o.in_block(dyi));
    memory::desc x = max ? user(o.in[0], o.in_block(0)) : out;
    auto fwd = pool_forward_pd(a, x, dy, dnnl::prop_kind::forward_training, attr);
    dnnl::pooling_backward::desc desc(pool_algorithm(a), out, dy, dims_of(a.strides),
                                      dims_of(a.window), dims_of(a.pad_lo), dims_of(a.pad_hi));
    dnnl::pooling_backward::primitive_desc pd(desc, attr, dnnl_engine(), fwd);
    p->main = dnnl::pooling_backward(pd);
    add_arg(*p, DNNL_ARG_DIFF_DST, int(dyi), dy, pd.diff_dst_desc());
    add_arg(*p, DNNL_ARG_DIFF_SRC, -1, out, pd.diff_src_desc());
    p->scratch = pd.scratchpad_desc();
    p->impl = pd.impl_info_str();
    if (max) {
        p->forward = dnnl::pooling_forward(fwd);
        p->forward_src = fwd.src_desc();
        p->forward_dst = fwd.dst_desc();
        p->forward_scratch = fwd.scratchpad_desc();
        p->workspace = fwd.workspace_desc();
    }
    return p;
}

/// block_channels / unblock_channels: one oneDNN reorder between the two layouts.
/// `logical`: the [N, C, spatial...] side's shape.
std::shared_ptr<WindowPrimitive> make_reblock(const Node& n, const Shape& logical) {
    auto p = std::make_shared<WindowPrimitive>();
    bool to_blocked = n.is(Op::BlockChannels);
    int64_t B =
        to_blocked ? detail::block_width(detail::blocked_mask(n)) : n.input(0)->shape().back();
    memory::desc from = to_blocked ? plain(logical) : blocked(logical, B);
    memory::desc to = to_blocked ? blocked(logical, B) : plain(logical);
    dnnl::reorder::primitive_desc pd(dnnl_engine(), from, dnnl_engine(), to, user_scratchpad());
    p->main = dnnl::reorder(pd);
    add_arg(*p, DNNL_ARG_FROM, 0, from, from);
    add_arg(*p, DNNL_ARG_TO, -1, to, to);
    p->scratch = pd.scratchpad_desc();
    p->impl = pd.impl_info_str();
    return p;
}

// ---- temporaries ----------------------------------------------------------------------------

size_t aligned(size_t bytes) { return (bytes + 63) & ~size_t(63); }

/// The bytes of the temporaries one call needs: operands in the primitive's layout, the
/// scratchpad, and for max-pool backward the forward's output and workspace.
size_t temp_bytes(const WindowPrimitive& p) {
    size_t n = aligned(p.scratch.get_size());
    if (!p.forward) n += aligned(p.workspace.get_size()); // a pool's own, when nobody keeps it
    for (const auto& a : p.args)
        if (a.reorder) n += aligned(a.prim.get_size());
    if (p.forward)
        n += aligned(p.workspace.get_size()) + aligned(p.forward_dst.get_size()) +
             aligned(p.forward_scratch.get_size());
    n += aligned(p.bias.get_size()) + aligned(p.weights_user.get_size());
    if (p.filter) // the partial gradients (by outputs: one per task) and a scratchpad per task
        n += (p.filter->by_outputs
                  ? size_t(p.filter->tasks) * aligned(p.filter->partial_bytes)
                  : size_t(p.filter->count) * aligned(p.filter->diff_weights.get_size())) +
             size_t(p.filter->tasks) * aligned(p.filter->scratch);
    return n;
}

/// Per-thread memory for the temporaries of a call, grown to the largest call and kept: fresh
/// allocations of this size would fault in new pages on every call (a few ms for a 32 x 64 x
/// 32 x 32 layer). A thread runs one call at a time.
class Arena {
public:
    char* reserve(size_t bytes) {
        if (bytes > cap_) {
            cap_ = 0; // a failed allocation leaves no buffer
            data_.reset(static_cast<char*>(std::aligned_alloc(64, aligned(bytes))));
            SJ_CHECK(data_, OutOfMemoryError)
                << "out of memory allocating " << bytes << " bytes of scratch for a oneDNN call";
            cap_ = aligned(bytes);
        }
        next_ = data_.get();
        return next_;
    }
    /// A 64-byte aligned piece for `md` (after reserve() of the call's total).
    memory take(const memory::desc& md) { return memory(md, dnnl_engine(), take(md.get_size())); }
    char* take(size_t bytes) {
        char* p = next_;
        next_ += aligned(bytes);
        return p;
    }

private:
    struct Free {
        void operator()(char* p) const { std::free(p); }
    };
    std::unique_ptr<char, Free> data_;
    size_t cap_ = 0;
    char* next_ = nullptr;
};

// ---- the cache
// -----------------------------------------------------------------------------------

/// Most primitives kept; the least recently used goes first (a network has a few dozen).
constexpr size_t kCacheCapacity = 256;

struct Cache {
    std::mutex mu;
    using Entry = std::pair<std::string, std::shared_ptr<const WindowPrimitive>>;
    std::list<Entry> lru; // most recent first
    std::unordered_map<std::string, std::list<Entry>::iterator> index;
    WindowCacheStats stats;
};

Cache& cache() {
    static Cache* c = new Cache; // never destroyed: primitives may be used during exit
    return *c;
}

std::string cache_key(const Node& n, const std::vector<TensorType>& in, const TensorType& out,
                      const std::vector<compiler::PostOp>& epilogue, bool keep_workspace,
                      bool fixed_weights) {
    std::string k = op_name(n.op());
    for (const auto& t : in) k += type_str(t);
    k += "->" + type_str(out) + "|" + attrs_str(n.attrs()) + post_ops_key(epilogue);
    if (keep_workspace) k += "|workspace";
    if (fixed_weights)
        k += "|fixed";
    return k;
}

} // namespace

std::shared_ptr<const WindowPrimitive>
window_primitive(const Node& n, const std::vector<TensorType>& in, const TensorType& out,
                 const std::vector<compiler::PostOp>& epilogue, bool keep_workspace,
                 bool fixed_weights) {
    SJ_ASSERT(epilogue.empty() || n.is(Op::Conv)) << "post-ops on " << op_name(n.op());
    keep_workspace = keep_workspace && n.is(Op::Pool) && n.attr<PoolAttrs>().kind == PoolKind::Max;
    fixed_weights = fixed_weights && n.is(Op::Conv);
    std::string key = cache_key(n, in, out, epilogue, keep_workspace, fixed_weights);
    Cache& c = cache();
    {
        std::lock_guard<std::mutex> lock(c.mu);
        if (auto it = c.index.find(key); it != c.index.end()) {
            c.lru.splice(c.lru.begin(), c.lru, it->second);
            ++c.stats.hits;
            return it->second->second;
        }
        ++c.stats.misses;
    }
    std::shared_ptr<const WindowPrimitive> p;
    bool empty = numel(out.shape) == 0;
    for (size_t i = 0; i < in.size(); ++i) empty = empty || numel(in[i].shape) == 0;
    if (!empty) { // empty operands: null, the reference kernel writes the zeros (or nothing)
        // oneDNN plans its work split for the thread count at creation: make it the one the
        // calls will run with
        match_dnnl_threads();
        try {
            bool conv = n.is(Op::Conv) || n.is(Op::ConvBackwardData) ||
                        n.is(Op::ConvBackwardFilter);
            std::shared_ptr<WindowPrimitive> made =
                n.is(Op::BlockChannels)     ? make_reblock(n, in[0].shape)
                : n.is(Op::UnblockChannels) ? make_reblock(n, out.shape)
                : conv ? make_conv(n, logical_operands(n, in, out), epilogue, fixed_weights)
                       : make_pool(n, logical_operands(n, in, out), keep_workspace);
            made->temp_bytes = temp_bytes(*made);
            p = std::move(made);
        } catch (const dnnl::error& e) {
            if (detail::debug_level() >= 1)
                std::fprintf(stderr, "[symjax] oneDNN declined %s: %s (reference kernel)\n",
                             key.c_str(), e.message);
            p = nullptr;
        }
    }
    if (p && detail::debug_level() >= 3)
        std::fprintf(stderr, "[symjax] %s: oneDNN %s%s%s\n", op_name(n.op()), p->impl.c_str(),
                     epilogue.empty() ? "" : ", post-ops", post_ops_key(epilogue).c_str());
    std::lock_guard<std::mutex> lock(c.mu);
    if (auto it = c.index.find(key); it != c.index.end()) return it->second->second; // raced
    c.lru.emplace_front(key, p);
    c.index[key] = c.lru.begin();
    if (c.lru.size() > kCacheCapacity) {
        c.index.erase(c.lru.back().first);
        c.lru.pop_back();
    }
    c.stats.entries = c.lru.size();
    return p;
}

// counted on every folding conv call: atomics, not the primitive cache's lock
std::atomic<size_t> g_folded_hits{0}, g_folded_misses{0};

std::string window_impl(const WindowPrimitive& p) {
    return p.impl;
}

bool winograd_impl(const std::string& impl) {
    return impl.find("wino") != std::string::npos;
}

WindowCacheStats window_cache_stats() {
    Cache& c = cache();
    std::lock_guard<std::mutex> lock(c.mu);
    WindowCacheStats s = c.stats;
    s.folded_hits = g_folded_hits.load();
    s.folded_misses = g_folded_misses.load();
    return s;
}

namespace {

/// conv_backward_filter: each chunk of the batch into its own partial gradient, on one thread,
/// then the partials added in chunk order (Note [Thread-count-independent weight gradients]);
/// or each chunk of the output channels of a batch of one into its own rows of the gradient
/// (Note [Weight gradients of a batch of one]). src, diff_dst: in the chunks' layout;
/// diff_weights: the sum's buffer, in the caller's layout when f.user_offset maps the chunks' one
/// into it (by outputs: always the caller's).
void run_filter_chunks(const FilterChunks& f, const void* src, const void* diff_dst,
                       void* diff_weights, Arena& arena, KeptMemories& kept) {
    std::vector<float*> partial; // by images: one per chunk; by outputs: one per task
    const size_t partial_bytes = f.by_outputs ? f.partial_bytes : f.diff_weights.get_size();
    for (int c = 0; c < (f.by_outputs ? f.tasks : f.count); ++c)
        partial.push_back(reinterpret_cast<float*>(arena.take(partial_bytes)));
    std::vector<char*> scratch;
    for (int t = 0; t < f.tasks; ++t)
        scratch.push_back(arena.take(f.scratch));
    const char* x = static_cast<const char*>(src);
    const char* dy = static_cast<const char*>(diff_dst);
    // the sum: each element adds its partials in chunk order, whoever computes it; part `t` of
    // `parts`
    auto* sum = static_cast<float*>(diff_weights);
    const int64_t n = int64_t(f.diff_weights.get_size() / sizeof(float));
    auto add_partials = [&](int t, int parts) {
        const int64_t begin = n * t / parts, end = n * (t + 1) / parts;
        if (f.user_offset.empty())
            add_in_double(partial.data(), f.count, begin, end, sum);
        else
            add_in_double_to(partial.data(), f.count, begin, end, f.user_offset.data(), sum);
    };
    const ThreadPool& pool = ThreadPool::get();
    // each task's memory objects, one set per size of chunk, their pointers moved from chunk to
    // chunk and kept between calls (Note [Call arguments kept] in Dnnl.cpp)
    KeptMemories* task_kept = kept.tasks(size_t(f.tasks));
    auto chunks = [&](int t) {
        // one thread in the call too: a GEMM-based primitive may ask for the thread count when
        // it runs (outside a parallel region, with one task, that would be the pool's)
        OneDnnlThread one;
        dnnl::stream& s = thread_stream();
        KeptMemories& mine = task_kept[t];
        // a call of sizes[size]'s primitive on the units from `begin`, into partial `c`
        auto run_call = [&](int size, int64_t begin, int c) {
            const FilterChunk& k = f.sizes[size_t(size)];
            void* src_at = const_cast<char*>(x) + size_t(begin) * f.src_unit_bytes;
            void* dy_at = const_cast<char*>(dy) + size_t(begin) * f.diff_dst_unit_bytes;
            // by outputs: the call's rows start at element begin * weights_unit of the caller's
            float* rows = sum + begin * f.weights_unit;
            float* dw_at = !f.by_outputs       ? partial[size_t(c)]
                           : k.to_user.empty() ? rows
                                               : partial[size_t(t)];
            const int of_size = size << 20; // (the keys of the second size's set)
            ExecArgs a;
            a.add(DNNL_ARG_SRC, mine.at(DNNL_ARG_SRC | of_size, src_at, [&] { return k.src; }));
            a.add(DNNL_ARG_DIFF_DST,
                  mine.at(DNNL_ARG_DIFF_DST | of_size, dy_at, [&] { return k.diff_dst; }));
            a.add(DNNL_ARG_DIFF_WEIGHTS, mine.at(DNNL_ARG_DIFF_WEIGHTS | of_size, dw_at, [&] {
                return f.by_outputs ? k.diff_weights : f.diff_weights;
            }));
            if (f.scratch)
                a.add(DNNL_ARG_SCRATCHPAD, mine.at(DNNL_ARG_SCRATCHPAD, scratch[size_t(t)], [&] {
                    return memory::desc({memory::dim(f.scratch)}, dt::u8, memory::format_tag::a);
                }));
            a.execute(k.prim, s);
            if (f.by_outputs && !k.to_user.empty()) { // the rows to their places in the caller's
                s.wait();
                for (size_t j = 0; j < k.to_user.size(); ++j)
                    if (k.to_user[j] >= 0)
                        rows[k.to_user[j]] = dw_at[j];
            }
        };
        // a contiguous run of chunks (Note [Tasks stay on their thread] in ThreadPool.cpp)
        for (int c = f.count * t / f.tasks; c < f.count * (t + 1) / f.tasks; ++c) {
            const int64_t begin = f.units * c / f.count, end = f.units * (c + 1) / f.count;
            if (f.unit_calls)
                for (int64_t u = begin; u < end; ++u)
                    run_call(0, u, c);
            else
                run_call(end - begin == f.sizes[0].units ? 0 : 1, begin, c);
        }
        s.wait();
    };
    if (f.by_outputs)
        pool.run(f.tasks, chunks);
    else // the partials added in the chunks' region, each task its share (Note [Work after a
         // barrier] in ThreadPool.cpp)
        pool.run(f.tasks, chunks, [&](int t) { add_partials(t, f.tasks); });
}

/// Whether the kept weights in `f` were made from w's bytes and this scale (counted as a hit or
/// a miss); on a miss, sizes f.weights for `bytes` of the primitive's layout.
bool kept_weights_current(FoldedWeights& f, const Array& w, const std::vector<float>& scale,
                          size_t bytes) {
    const size_t n = size_t(w.nbytes());
    const bool same_weights = f.weights_version != 0
                                  ? f.made_from_version == f.weights_version
                                  : f.made_from_version == 0 && f.source.size() == n &&
                                        std::memcmp(f.source.data(), w.raw(), n) == 0;
    const bool hit = f.weights.defined() && f.scale == scale && same_weights;
    ++(hit ? g_folded_hits : g_folded_misses);
    if (!hit && (!f.weights.defined() || size_t(f.weights.nbytes()) != bytes))
        f.weights = Array::uninitialized(DType::U8, {int64_t(bytes)});
    return hit;
}

/// Records what the kept weights were made from.
void remember_source(FoldedWeights& f, const Array& w, const std::vector<float>& scale) {
    f.made_from_version = f.weights_version;
    if (f.weights_version != 0) {
        std::vector<unsigned char>().swap(f.source); // (the stamp says it all)
    } else {
        const auto* src = static_cast<const unsigned char*>(w.raw());
        f.source.assign(src, src + w.nbytes());
    }
    f.scale = scale;
}

// Note [Folded weights cache]
// In inference a convolution followed by batch norm scales its weights' rows by
// gamma / sqrt(var + eps) on every call (Note [Affine prefix] in Dnnl.cpp), and oneDNN then
// reorders them into its blocked layout: two passes over the weights, and at batch 1 a fifth of
// a small network's call. The call site keeps the result (FoldedWeights, one per step of a
// CallPlan) with what it was made from: the stamp of the weights' variable (Note [Variable
// versions] in src/runtime/Variable.cpp) and the per-channel scale, which the call computes
// from the statistics (C floats, compared). A call whose weights carry the same stamp and whose
// scale compares equal uses the kept weights as they are; a training step, an assignment, a
// reset or a checkpoint load gives the variable a new stamp, and the next call makes them
// again. Weights that are not a variable's value (an input, a computed value) have no stamp:
// their bytes are kept and compared instead. The kept weights are made by the same scaling and
// reorder as before, so a hit gives the same bits.
//
// Until 2026-12-06 every call compared the bytes: a memcmp of every kept conv's weights per
// inference call, and a copy of them per kept conv. The 19 MB of weights of `symjax_bench
// conv_stack_infer` (8 convs of 256 channels) made its batch-1 call 1.9x as long as with the
// stamps (2.4-2.6 ms against 1.26-1.42, AMD EPYC, 2 threads; docs/performance.md, "Kept conv
// weights checked by stamp"); a ResNet-50 holds 100 MB. A stamp check is one load whatever the
// size.
void fold_weights(const WindowPrimitive& p, const WindowArg& a, const Array& w,
                  const std::vector<float>& scale, FoldedWeights& f, Arena& arena,
                  dnnl::stream& s) {
    if (kept_weights_current(f, w, scale, a.prim.get_size()))
        return;
    // scaled straight into the kept buffer when the primitive takes our layout
    memory scaled =
        a.reorder ? arena.take(p.weights_user) : memory(a.prim, dnnl_engine(), f.weights.raw());
    const float* x = static_cast<const float*>(w.raw());
    float* y = static_cast<float*>(scaled.get_data_handle());
    const int64_t c = int64_t(scale.size()), row = w.size() / c;
    for (int64_t o = 0; o < c; ++o)
        for (int64_t k = 0; k < row; ++k)
            y[o * row + k] = x[o * row + k] * scale[size_t(o)];
    if (a.reorder) {
        memory kept(a.prim, dnnl_engine(), f.weights.raw());
        dnnl::reorder(a.reorder).execute(s, scaled, kept);
    }
    remember_source(f, w, scale);
}

/// A Winograd conv's weights in the primitive's layout, kept in `f` while their variable is not
/// written (Note [Winograd convolutions]; the check is Note [Folded weights cache]'s): oneDNN's
/// Winograd weight transform took 0.23 ms a call for 32x32 3x3 weights, more than the
/// convolution of an 8x8 map.
void keep_reordered_weights(const WindowArg& a, const Array& w, FoldedWeights& f, dnnl::stream& s) {
    if (kept_weights_current(f, w, {}, a.prim.get_size()))
        return;
    memory user(a.user, dnnl_engine(), const_cast<void*>(w.raw()));
    memory kept(a.prim, dnnl_engine(), f.weights.raw());
    if (a.reorder)
        dnnl::reorder(a.reorder).execute(s, user, kept);
    else
        std::memcpy(f.weights.raw(), w.raw(), size_t(w.nbytes()));
    remember_source(f, w, {});
}

/// Runs a reorder primitive from `from` to `to`.
void run_reorder(const dnnl::reorder& r, const memory& from, const memory& to, dnnl::stream& s) {
    ExecArgs a;
    a.add(DNNL_ARG_FROM, from);
    a.add(DNNL_ARG_TO, to);
    a.execute(r, s);
}

// the keys of KeptMemories other than an argument's DNNL_ARG_* (Note [Call arguments kept])
constexpr int kUserSide = 1 << 28;   // an argument's buffer in our layout, reordered from or to
constexpr int kForwardArg = 1 << 29; // max-pool backward: the forward pass's arguments

void run_window_impl(const WindowPrimitive& p, const std::vector<const Array*>& in, Array& out,
                     const std::vector<const Array*>& post_operands, Array* workspace,
                     FoldedWeights* folded, KeptMemories& kept) {
    thread_local Arena arena;
    arena.reserve(p.temp_bytes);
    dnnl::stream& s = thread_stream();
    kept.begin(&p); // (Note [Call arguments kept] in Dnnl.cpp)
    ExecArgs args;
    std::vector<std::pair<const WindowArg*, const memory*>> results; // (arg, the primitive's)
    const memory* out_user = nullptr;
    thread_local std::vector<float> scale; // the weights' per-channel scale (p.scale_weights)
    if (p.affine) {
        int64_t c = p.channel.channels;
        scale.resize(size_t(c));
        const memory& bias =
            kept.at(DNNL_ARG_BIAS, arena.take(p.bias.get_size()), [&] { return p.bias; });
        affine_of(p.epilogue, p.affine, post_operands, c, scale.data(),
                  static_cast<float*>(bias.get_data_handle()));
        args.add(DNNL_ARG_BIAS, bias);
    }
    // weights kept between calls: folded with a batch norm's scale, or in Winograd's layout
    const bool kept_weights = p.scale_weights || p.keep_weights;
    FoldedWeights local; // a caller that keeps none: made for this call (read by the primitive)
    if (kept_weights) {
        FoldedWeights& f = folded ? *folded : local;
        for (const WindowArg& a : p.args)
            if (a.operand == 1) {
                if (p.scale_weights)
                    fold_weights(p, a, *in[1], scale, f, arena, s);
                else
                    keep_reordered_weights(a, *in[1], f, s);
                args.add(a.id, kept.at(a.id, f.weights.raw(), [&] { return a.prim; }));
            }
    }
    for (const WindowArg& a : p.args) {
        if (a.operand == 1 && kept_weights)
            continue; // the kept weights
        void* ptr = a.operand >= 0 ? const_cast<void*>(in[size_t(a.operand)]->raw()) : out.raw();
        if (!a.reorder) {
            args.add(a.id, kept.at(a.id, ptr, [&] { return a.user; }));
            continue;
        }
        const memory& user = kept.at(a.id | kUserSide, ptr, [&] { return a.user; });
        const memory& tmp = kept.at(a.id, arena.take(a.prim.get_size()), [&] { return a.prim; });
        if (a.operand >= 0) {
            run_reorder(a.reorder, user, tmp, s);
        } else {
            out_user = &user;
            results.emplace_back(&a, &tmp);
            if (a.reorder_in)
                run_reorder(a.reorder_in, user, tmp, s); // the sum's
        }
        args.add(a.id, tmp);
    }
    if (p.scratch.get_size())
        args.add(DNNL_ARG_SCRATCHPAD, kept.at(DNNL_ARG_SCRATCHPAD, arena.take(p.scratch.get_size()),
                                              [&] { return p.scratch; }));
    if (p.workspace.get_size() && !p.forward) { // a training-mode pool: keep its workspace
        void* ws = nullptr;
        if (workspace) {
            if (!workspace->defined() || size_t(workspace->size()) != p.workspace.get_size())
                *workspace = Array::uninitialized(DType::U8, {int64_t(p.workspace.get_size())});
            ws = workspace->raw();
        }
        if (!ws)
            ws = arena.take(p.workspace.get_size());
        args.add(DNNL_ARG_WORKSPACE, kept.at(DNNL_ARG_WORKSPACE, ws, [&] { return p.workspace; }));
    }
    if (p.forward && workspace && workspace->defined()) { // the paired pool's
        SJ_ASSERT(size_t(workspace->size()) == p.workspace.get_size())
            << "max-pool backward: the paired forward's workspace has " << workspace->size()
            << " bytes, " << p.workspace.get_size() << " expected";
        args.add(DNNL_ARG_WORKSPACE,
                 kept.at(DNNL_ARG_WORKSPACE, workspace->raw(), [&] { return p.workspace; }));
    } else if (p.forward) { // max-pool backward: recompute the workspace (Note [Max-pool workspace])
        const memory& ws = kept.at(DNNL_ARG_WORKSPACE, arena.take(p.workspace.get_size()),
                                   [&] { return p.workspace; });
        ExecArgs fargs;
        fargs.add(DNNL_ARG_SRC, kept.at(DNNL_ARG_SRC | kForwardArg, const_cast<void*>(in[0]->raw()),
                                        [&] { return p.forward_src; }));
        fargs.add(DNNL_ARG_DST,
                  kept.at(DNNL_ARG_DST | kForwardArg, arena.take(p.forward_dst.get_size()),
                          [&] { return p.forward_dst; }));
        fargs.add(DNNL_ARG_WORKSPACE, ws);
        if (p.forward_scratch.get_size())
            fargs.add(DNNL_ARG_SCRATCHPAD, kept.at(DNNL_ARG_SCRATCHPAD | kForwardArg,
                                                   arena.take(p.forward_scratch.get_size()),
                                                   [&] { return p.forward_scratch; }));
        fargs.execute(p.forward, s);
        args.add(DNNL_ARG_WORKSPACE, ws);
    }
    add_post_op_args(args, kept, p.epilogue, post_operands, p.channel, p.affine);
    if (p.filter) {
        s.wait(); // the inputs' reorders
        run_filter_chunks(*p.filter, args.data(DNNL_ARG_SRC), args.data(DNNL_ARG_DIFF_DST),
                          args.data(DNNL_ARG_DIFF_WEIGHTS), arena, kept);
    } else {
        args.execute(p.main, s);
    }
    for (auto& [a, tmp] : results)
        run_reorder(a->reorder, *tmp, *out_user, s);
    s.wait();
}

} // namespace

bool keeps_workspace(const WindowPrimitive& p) { return !p.forward && p.workspace.get_size() > 0; }

bool runs_on_team(const WindowPrimitive& p) {
    return !p.one_thread;
}

bool shares_workspace(const WindowPrimitive& forward, const WindowPrimitive& backward) {
    return keeps_workspace(forward) && backward.forward && forward.workspace == backward.workspace;
}

void run_window(const WindowPrimitive& p, const std::vector<const Array*>& in, Array& out,
                const std::vector<const Array*>& post_operands, Array* workspace,
                FoldedWeights* folded, KeptMemories* kept) {
    match_dnnl_threads();
    KeptMemories local; // (a caller that keeps none)
    std::optional<OneDnnlThread> one;
    if (p.one_thread)
        one.emplace(); // (Note [Small pools on one thread])
    try {
        run_window_impl(p, in, out, post_operands, workspace, folded, kept ? *kept : local);
    } catch (const dnnl::error& e) {
        // the primitive was accepted for these shapes: a failure here is oneDNN's or ours
        SJ_ASSERT(false) << "oneDNN failed running " << p.impl << ": " << e.message;
    }
}

double window_flops(const Node& n, const std::vector<TensorType>& in, const TensorType& out) {
    // a convolution multiplies each element of y [N, O, out...] with the (C / groups) K filter
    // entries of its output channel, in every direction
    auto per_output = [](const Shape& w) {
        return w[0] > 0 ? double(numel(w)) / double(w[0]) : 0.0;
    };
    switch (n.op()) {
    case Op::Conv: return 2.0 * double(numel(out.shape)) * per_output(in[1].shape);
    case Op::ConvBackwardData: return 2.0 * double(numel(in[0].shape)) * per_output(in[1].shape);
    case Op::ConvBackwardFilter: return 2.0 * double(numel(in[1].shape)) * per_output(out.shape);
    case Op::Pool: return double(numel(out.shape)) * double(numel(n.attr<PoolAttrs>().window));
    case Op::MaxPoolBackward:
    case Op::AvgPoolBackward:
        return double(numel(in[n.is(Op::MaxPoolBackward) ? 1 : 0].shape)) *
               double(numel(n.attr<PoolAttrs>().window));
    case Op::BlockChannels: // reorders: no arithmetic
    case Op::UnblockChannels:
#define SJ_CASES_OUTSIDE_Window
#include "ops/OpCasesOutside.inc" // Note [Family switches]
        return 0;
    }
    return 0;
}

} // namespace sj::cpu
