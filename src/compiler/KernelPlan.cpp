// plan_kernel: affine index maps from movement chains, loop order, dim collapsing.
#include "KernelPlan.h"

#include <symjax/ir/Attrs.h>
#include <symjax/ir/Node.h>

#include <algorithm>
#include <sstream>

namespace sj::compiler {

namespace {

/// coords of the current node = off + A * idx (rows: node dims, cols: iteration dims)
struct Affine {
    std::vector<std::vector<int64_t>> a;
    std::vector<int64_t> off;
};

Affine identity(size_t r) {
    Affine m;
    m.a.assign(r, std::vector<int64_t>(r, 0));
    m.off.assign(r, 0);
    for (size_t i = 0; i < r; ++i) m.a[i][i] = 1;
    return m;
}

/// Maps the coordinates of node n (map m) to those of its input i.
Affine step(const Affine& m, const Node& n, int i, const ShapeOf& shape_of) {
    const Shape& in = shape_of(n.input(i).get());
    const Shape& out = shape_of(&n);
    size_t cols = m.a.empty() ? 0 : m.a[0].size();
    Affine r;
    r.a.assign(in.size(), std::vector<int64_t>(cols, 0));
    r.off.assign(in.size(), 0);
    auto copy_row = [&](size_t dst, size_t src, int64_t scale, int64_t add) {
        for (size_t c = 0; c < cols; ++c) r.a[dst][c] = scale * m.a[src][c];
        r.off[dst] = add + scale * m.off[src];
    };
    switch (n.op()) {
    case Op::Permute: {
        const auto& p = n.attr<AxesAttrs>().axes;
        for (size_t k = 0; k < p.size(); ++k) copy_row(p[k], k, 1, 0);
        return r;
    }
    case Op::Broadcast: {
        const auto& d = n.attr<BroadcastAttrs>().dims;
        for (size_t k = 0; k < in.size(); ++k)
            if (in[k] != 1) copy_row(k, d[k], 1, 0);
        return r;
    }
    case Op::Slice: {
        const auto& s = n.attr<SliceAttrs>();
        for (size_t k = 0; k < in.size(); ++k) {
            auto b = slice_bounds(in[k], s.start[k], s.stop[k], s.step[k]);
            copy_row(k, k, s.step[k], b.start);
        }
        return r;
    }
    case Op::Flip: {
        std::vector<bool> f(in.size(), false);
        for (int64_t a : n.attr<AxesAttrs>().axes) f[a] = true;
        for (size_t k = 0; k < in.size(); ++k)
            f[k] ? copy_row(k, k, -1, in[k] - 1) : copy_row(k, k, 1, 0);
        return r;
    }
    // every other op reads its inputs elementwise with NumPy broadcasting: right-aligned,
    // size-1 dims read index 0
#define SJ_CASES_OUTSIDE_Movement
#include "ops/OpCasesOutside.inc" // Note [Family switches]
        break;
    }
    size_t lead = out.size() - in.size();
    for (size_t k = 0; k < in.size(); ++k)
        if (in[k] != 1) copy_row(k, k + lead, 1, 0);
    return r;
}

/// One loop of the nest, with its stride per operand (loads, then outputs).
struct Loop {
    int64_t size;
    bool reduce;
    std::vector<int64_t> stride;
};

// Note [Row reductions]
// Loops are ordered kept dims, then reduced dims: each kept point walks its own reduction in
// the innermost loop. When the innermost memory dim is kept and the reduced dims are outer to
// it (per-channel statistics of a channel-blocked [N, C/16, H, W, 16] tensor over (0, 2, 3); a
// bias gradient, [B, F] over 0), that walk strides through memory: nothing vectorises and each
// cache line is fetched once per output it holds. Then the last kept loop moves inside the
// reduction loops as a "row" loop with one accumulator per row element:
//
//   for kept-outer...:  acc[0..row) = init
//     for reduced...:
//       for r < row:    acc[r] = acc[r] op f(x[.., r])
//     out[.., 0..row) = acc
//
// The inner loop is an elementwise update of an accumulator row that stays in L1; it
// vectorises over the row and the tensor is read once, in memory order. It is chosen when the
// row loop is contiguous for every operand (stride 0 or 1, and 1 for at least one load), the
// innermost reduction loop is contiguous for no load (else the usual order already reads
// memory in order and vectorises its sums) or is shorter than a vector, and the row has at most
// kMaxRow elements: 1024 double accumulators (8 KiB) and an f32 block row (Note [f32 sums]) per
// output leave most of L1 to the data. The width is a constant of the spec (KernelSpec::row, part
// of its text): a short row (16 in nChw16c) is unrolled into vector registers, a long one needs no
// remainder. Threads split loop 0 (CpuExecutable's run_kernel): the kept-outer loop when there is
// one, otherwise the outermost reduction loop into private outputs that are combined afterwards
// (the bias gradient). A kept-outer loop of few trips (C/16 channel blocks) is not split: the cpu
// runner cuts the first reduction loop after it (the batch) into fixed chunks with private
// outputs instead, so that each thread reads the images its core wrote (Note [Reductions split
// along the batch] in src/backend/cpu/CpuExecutable.cpp; KernelLaunch::first_reduce).
constexpr int64_t kMaxRow = 1024;

/// Loops of at most this many trips get their count compiled in (Note [Short loops compiled
/// in]).
constexpr int64_t kShortLoop = 4;

/// Whether the nest `ls` (kept loops first, `nkept` of them, then reduction loops) runs
/// faster with its last kept loop innermost (Note [Row reductions]).
bool row_order(const std::vector<Loop>& ls, size_t nkept, size_t nloads, int vector_lanes) {
    if (nkept == 0 || nkept == ls.size()) return false;
    const Loop& row = ls[nkept - 1];
    if (row.size < 2 || row.size > kMaxRow) return false;
    bool unit = false;
    for (size_t o = 0; o < row.stride.size(); ++o) {
        if (row.stride[o] != 0 && row.stride[o] != 1) return false;
        unit |= o < nloads && row.stride[o] == 1;
    }
    // (a contiguous innermost reduction loop shorter than a vector, such as a window position
    // read from a small table, vectorises nothing: Note [Window gradients in the space of their
    // windows] in src/backend/cpu/PoolKernels.cpp)
    if (ls.back().size >= vector_lanes)
        for (size_t o = 0; o < nloads; ++o)
            if (ls.back().stride[o] == 1)
                return false;
    return unit;
}

// Note [Long rows split]
// A row of accumulators in L1 pays a load and a store per element and reduction step, and a row
// longer than kMaxRow does not fit Note [Row reductions]' budget at all: the usual order then
// walks each output's reduction down a column ([2048, 4096] summed over dim 0 took 52 ms, 0.6
// GB/s). So a row longer than kSplitRowAbove is split into a kept loop of length / r trips
// (stride r times the row's) around a row of r, a divisor of the length, and the row order
// applies to the split nest: each r-wide piece is an accumulator row of a few cache lines, the
// tensor is read in r-wide runs, and the pieces give the threads a kept loop to split (no
// private outputs to combine). Measured on the 2-core Zen 4 VM (docs/performance.md, "Long rows
// split"), rows of 64-128 ran fastest: a [128, 4096] bias gradient at 133-150 GB/s against
// 17-24 with rows of 1024 and 1.3-1.4 unsplit, [128, 512] at 87-94 against 44-62. r is taken
// from [kMinSplitRow, kSplitRowMax], a multiple of the vector width first, then the longest;
// failing that, the longest divisor up to kMaxRow. A length with neither (a prime) stays whole.
constexpr int64_t kSplitRowAbove = 256;
constexpr int64_t kSplitRowMax = 128;
constexpr int64_t kMinSplitRow = 64;

/// The row length a kept loop of `size` trips splits into, or 0 (Note [Long rows split]).
int64_t split_row(int64_t size, int vector_lanes) {
    int64_t best = 0;
    for (int64_t r = kSplitRowMax; r >= kMinSplitRow; --r) {
        if (size % r != 0) continue;
        if (r % vector_lanes == 0) return r;
        if (best == 0) best = r;
    }
    for (int64_t r = std::min(size / 2, kMaxRow); r > kSplitRowMax && best == 0; --r)
        if (size % r == 0) best = r;
    return best;
}

} // namespace

KernelLaunch plan_kernel(const Group& g, const FusionPlan& plan, const ShapeOf& shape_of, int vector_lanes) {
    KernelLaunch L;
    const Shape& space = shape_of(g.space.get());
    size_t R = space.size();
    std::vector<bool> red(R, false);
    for (int64_t a : g.reduce_axes) red[a] = true;

    // per-operand strides over the iteration dims, plus a base offset
    struct Access {
        std::vector<int64_t> stride;
        int64_t offset = 0;
    };
    std::vector<Access> acc;
    for (const auto& ld : g.loads) {
        Affine m = identity(R);
        for (const auto& [node, input] : plan.chains[ld.chain]) m = step(m, *node, input, shape_of);
        auto rm = row_major_strides(shape_of(ld.buffer.get()));
        Access a;
        a.stride.assign(R, 0);
        for (size_t j = 0; j < rm.size(); ++j) {
            for (size_t c = 0; c < R; ++c) a.stride[c] += rm[j] * m.a[j][c];
            a.offset += rm[j] * m.off[j];
        }
        acc.push_back(std::move(a));
    }
    for (size_t k = 0; k < g.outputs.size(); ++k) {
        const Node* r = g.roots[k].get();
        const Shape& os = shape_of(r);
        L.out_shapes.push_back(os);
        // fusion merged these outputs on dims it proved equal (Note [Equal dynamic dims])
        SJ_ASSERT(shape_of(g.outputs[k].reduced ? r->input(0).get() : r) == space)
            << "kernel output " << r->describe(1) << " of shape "
            << shape_str(shape_of(g.outputs[k].reduced ? r->input(0).get() : r))
            << " does not span the kernel's space " << shape_str(space);
        Access a;
        a.stride.assign(R, 0);
        if (!g.outputs[k].reduced) {
            a.stride = row_major_strides(os);
        } else {
            // the output holds the kept dims (with 1s in place of reduced ones when keepdims)
            auto rm = row_major_strides(os);
            bool keep = r->attr<ReduceAttrs>().keepdims;
            size_t j = 0;
            for (size_t c = 0; c < R; ++c) {
                if (red[c]) {
                    if (keep) ++j;
                    continue;
                }
                a.stride[c] = rm[j++];
            }
        }
        acc.push_back(std::move(a));
    }

    // loop order: kept dims, then reduced dims (then maybe a row loop: Note [Row reductions])
    std::vector<size_t> loops;
    for (size_t c = 0; c < R; ++c)
        if (!red[c]) loops.push_back(c);
    int nkept_dims = static_cast<int>(loops.size());
    for (size_t c = 0; c < R; ++c)
        if (red[c]) loops.push_back(c);

    std::vector<Loop> ls;
    for (size_t k = 0; k < loops.size(); ++k) {
        Loop l{space[loops[k]], int(k) >= nkept_dims, {}};
        for (const auto& a : acc) l.stride.push_back(a.stride[loops[k]]);
        if (l.size == 1) continue; // a size-1 loop does nothing
        // collapse into the previous loop when contiguous for every operand
        if (!ls.empty() && ls.back().reduce == l.reduce) {
            bool ok = true;
            for (size_t o = 0; o < acc.size() && ok; ++o) ok = ls.back().stride[o] == l.stride[o] * l.size;
            if (ok) {
                ls.back().size *= l.size;
                ls.back().stride = l.stride;
                continue;
            }
        }
        ls.push_back(std::move(l));
    }
    // every reduced axis had size 1 (or there were none): keep one trip so accumulators are
    // initialised, combined once and stored
    bool any_reduce = false;
    for (const auto& l : ls) any_reduce |= l.reduce;
    if (!g.reduce_axes.empty() && !any_reduce) ls.push_back({1, true, std::vector<int64_t>(acc.size(), 0)});
    if (ls.empty()) ls.push_back({1, false, std::vector<int64_t>(acc.size(), 0)});
    KernelSpec& s = L.spec;
    size_t nkept = 0;
    while (nkept < ls.size() && !ls[nkept].reduce) ++nkept;
    if (nkept > 0 && nkept < ls.size() && ls[nkept - 1].size > kSplitRowAbove)
        if (int64_t r = split_row(ls[nkept - 1].size, vector_lanes)) {
            // (Note [Long rows split]; kept only if the split nest takes the row order)
            std::vector<Loop> split = ls;
            Loop outer = split[nkept - 1];
            outer.size /= r;
            for (auto& st : outer.stride)
                st *= r;
            split[nkept - 1].size = r;
            split.insert(split.begin() + std::ptrdiff_t(nkept) - 1, std::move(outer));
            if (row_order(split, nkept + 1, g.loads.size(), vector_lanes)) {
                ls = std::move(split);
                ++nkept;
            }
        }
    if (row_order(ls, nkept, g.loads.size(), vector_lanes)) {
        s.row = ls[nkept - 1].size;
        std::rotate(ls.begin() + nkept - 1, ls.begin() + nkept, ls.end());
    }

    // Note [Short inner loops]
    // The loop vectoriser runs 16 f32 lanes (AVX-512; Target::vector_lanes) times an interleave
    // of up to 4: an innermost loop of fewer trips than that, known only at run time, runs in its
    // scalar remainder. Channel-blocked tensors ([N, C / 16, H, W, 16] next to a per-channel
    // [1, C / 16, 1, 1, 16]) and small feature dims make exactly such loops, so a kept innermost
    // loop of at most kShortInner trips gets its trip count compiled in: LLVM then turns it into
    // whole vector operations. Only that count joins the kernel's key; the other sizes stay
    // runtime arguments.
    const int64_t kShortInner = 4 * int64_t(vector_lanes);
    if (s.row == 0 && ls.size() >= 2 && !ls.back().reduce && ls.back().size <= kShortInner)
        s.inner = ls.back().size;
    // Note [Short loops compiled in]
    // A loop of at most kShortLoop trips inside the outermost one (which the threads split by
    // ranges) gets its trip count compiled in, as a short inner loop does (Note [Short inner
    // loops]): LLVM unrolls it, and the loop inside it runs as that many copies in one body. In
    // the space of a 2x2 max pool's windows (Note [Window gradients in the space of their
    // windows] in src/backend/cpu/PoolKernels.cpp) the window column j, 2 trips around one
    // vector of 16 channels, becomes two vectors side by side in memory each trip of the loop
    // over W/2. The counts join the kernel's key only where some loop has one. Not first_reduce:
    // the cpu runner may cut it into chunks, each with its own trip count (Note [Reductions split
    // along the batch] in src/backend/cpu/CpuExecutable.cpp).
    L.split_reduce = ls[0].reduce;
    for (size_t k = 1; k < ls.size() && !L.split_reduce; ++k)
        if (ls[k].reduce) {
            L.first_reduce = int(k);
            break;
        }
    for (size_t d = 1; d + 1 < ls.size(); ++d)
        if (int(d) != L.first_reduce && ls[d].size >= 2 && ls[d].size <= kShortLoop) {
            s.trips.resize(ls.size(), 0);
            s.trips[d] = ls[d].size;
        }

    s.rank = static_cast<int>(ls.size());
    s.reduce_rank = 0;
    for (const auto& l : ls) s.reduce_rank += l.reduce;
    auto classify = [](int64_t st) {
        return st == 0 ? KStride::Zero : st == 1 ? KStride::One : KStride::Any;
    };
    for (size_t k = 0; k < g.loads.size(); ++k) {
        s.load_dtypes.push_back(g.loads[k].buffer->dtype());
        s.load_inner.push_back(classify(ls.back().stride[k]));
    }
    for (size_t k = 0; k < g.outputs.size(); ++k)
        s.out_inner.push_back(classify(ls.back().stride[g.loads.size() + k]));
    // Note [Zero strides compiled in]
    // A per-channel operand of a channel-blocked kernel ([1, C/16, 1, 1, 16] against [N, C/16, H,
    // W, 16]) has stride 0 along every loop but the channels'. As runtime arguments those strides
    // looked like any others, so each trip of the inner loops loaded the operand again and
    // computed its address with a multiply; compiled in, LLVM hoists the load out of the loops
    // along which the operand does not move. Only which strides are 0 joins the kernel's key.
    if (ls.size() <= 64)
        for (size_t o = 0; o < acc.size(); ++o) {
            uint64_t zero = 0;
            for (size_t d = 0; d < ls.size(); ++d)
                if (ls[d].stride[o] == 0)
                    zero |= uint64_t(1) << d;
            s.zero_strides.push_back(zero);
        }
    s.insts = g.insts;
    s.outputs = g.outputs;

    for (const auto& l : ls) L.params.push_back(l.size);
    for (size_t o = 0; o < acc.size(); ++o) {
        for (const auto& l : ls) L.params.push_back(l.stride[o]);
        L.params.push_back(acc[o].offset);
    }
    L.outer = ls[0].size;
    L.points = 1;
    for (const auto& l : ls) L.points *= l.size;
    for (int64_t d : space)
        L.points = d == 0 ? 0 : L.points;
    return L;
}

std::string KernelSpec::str() const {
    std::ostringstream os;
    os << "kernel rank=" << rank << " reduce=" << reduce_rank;
    if (row > 0) os << " row=" << row;
    if (inner > 0) os << " inner=" << inner;
    if (!trips.empty()) {
        os << " trips=";
        for (size_t d = 0; d < trips.size(); ++d)
            os << (d ? "," : "") << trips[d];
    }
    os << "\n";
    auto stride_name = [](KStride k) { return k == KStride::Zero ? "0" : k == KStride::One ? "1" : "n"; };
    auto zeros = [&](size_t o) {
        std::string z;
        if (o < zero_strides.size())
            for (int d = 0; d < rank; ++d)
                if ((zero_strides[o] >> d) & 1)
                    z += (z.empty() ? " zero=" : ",") + std::to_string(d);
        return z;
    };
    for (size_t i = 0; i < load_dtypes.size(); ++i)
        os << "  in" << i << ": " << dtype_name(load_dtypes[i])
           << " inner=" << stride_name(load_inner[i]) << zeros(i) << "\n";
    for (size_t i = 0; i < insts.size(); ++i) {
        const KInst& k = insts[i];
        os << "  v" << i << " = ";
        switch (k.kind) {
        case KInst::Kind::Load: os << "load in" << k.load; break;
        case KInst::Kind::Const: {
            std::ostringstream v;
            v.precision(17);
            v << k.value;
            os << "const " << v.str();
            break;
        }
        case KInst::Kind::Op:
            os << op_name(k.op) << "(";
            for (int a = 0; a < 3 && k.args[a] >= 0; ++a) os << (a ? ", " : "") << "v" << k.args[a];
            os << ")";
            break;
        }
        os << " : " << dtype_name(k.dtype) << "\n";
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
        const KOutput& o = outputs[i];
        os << "  out" << i << " = " << (o.reduced ? op_name(o.reduce_op) : "store");
        if (o.carry >= 0)
            os << (o.final ? " final" : " entering") << " carry" << o.carry;
        else
            os << " v" << o.value;
        os << " : " << dtype_name(o.dtype) << " inner=" << stride_name(out_inner[i])
           << zeros(load_dtypes.size() + i) << "\n";
    }
    if (steps) {
        os << "  steps";
        for (size_t c = 0; c < carry_load.size(); ++c)
            os << " carry" << c << "=(in" << carry_load[c] << ", v" << carry_next[c] << ")";
        os << "\n";
    }
    return os.str();
}

} // namespace sj::compiler
