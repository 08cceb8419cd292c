// In-graph augmentation layers: RandomFlip and RandomCrop on any axes, one draw per example.
#include "NnUtil.h"

#include <symjax/Ops.h>
#include <symjax/Random.h>
#include <symjax/nn/Augment.h>

#include <algorithm>
#include <sstream>
#include <tuple>

namespace sj::nn {

namespace {

/// `axes` made non-negative for x; each must name a dim other than the batch axis, once.
Axes example_axes(const Tensor& x, const Axes& axes, const char* who) {
    SJ_CHECK(x.rank() >= 2, ShapeError) << who << ": input " << x.name() << " " << x.type_str()
                                        << " must be [N, ...] with at least one dim per example";
    SJ_CHECK(!axes.empty(), InputError) << who << ": axes must not be empty";
    Axes out;
    for (int64_t a : axes) {
        SJ_CHECK(a >= -x.rank() && a < x.rank(), ShapeError)
            << who << ": axis " << a << " of axes " << detail::axes_str(axes) << " is out of range for "
            << x.name() << " " << x.type_str();
        const int64_t k = a < 0 ? a + x.rank() : a;
        SJ_CHECK(k != 0, InputError)
            << who << ": axes " << detail::axes_str(axes) << " name axis 0, the batch axis of " << x.name()
            << " " << x.type_str();
        SJ_CHECK(std::find(out.begin(), out.end(), k) == out.end(), InputError)
            << who << ": axes " << detail::axes_str(axes) << " name axis " << k << " twice";
        out.push_back(k);
    }
    return out;
}

/// x[:, 0, ..., 0]: a [N] tensor that gives per-example draws their batch size.
Tensor batch_probe(const Tensor& x) {
    std::vector<Index> idx(static_cast<size_t>(x.rank()), Index(0));
    idx[0] = sl();
    return x[idx];
}

/// Entry k of a per-axis option that takes one value per axis or one for all.
template <class T> const T& per_axis(const std::vector<T>& v, size_t k) {
    return v.size() == 1 ? v[0] : v[k];
}

} // namespace

// ---- RandomFlip ---------------------------------------------------------------------------------
RandomFlip::RandomFlip(RandomFlipOptions options)
    : o_(std::move(options)), calls_(std::make_shared<std::atomic<uint64_t>>(0)) {
    SJ_CHECK(o_.p >= 0 && o_.p <= 1, InputError)
        << "nn::RandomFlip: p must lie in [0, 1], got " << o_.p;
    SJ_CHECK(!o_.axes.empty(), InputError) << "nn::RandomFlip: axes must not be empty";
}

Tensor RandomFlip::forward(const Tensor& x, Mode mode) const {
    const Axes axes = example_axes(x, o_.axes, "nn::RandomFlip");
    if (mode == Mode::Eval || o_.p == 0)
        return x;
    Tensor flip_it =
        random::bernoulli_like(batch_probe(x), o_.p, detail::next_call_seed(o_.seed, *calls_));
    Shape per_example(static_cast<size_t>(x.rank()), 1);
    per_example[0] = -1;
    return where(reshape(flip_it, per_example), flip(x, axes), x);
}

// ---- RandomCrop ---------------------------------------------------------------------------------
RandomCrop::RandomCrop(RandomCropOptions options)
    : o_(std::move(options)), calls_(std::make_shared<std::atomic<uint64_t>>(0)) {
    const char* who = "nn::RandomCrop";
    SJ_CHECK(!o_.axes.empty(), InputError) << who << ": axes must not be empty";
    const size_t k = o_.axes.size();
    SJ_CHECK(o_.padding.empty() || o_.padding.size() == 1 || o_.padding.size() == k, InputError)
        << who << ": padding has " << o_.padding.size() << " pairs for " << k
        << " axes; give one pair per axis or one for all";
    SJ_CHECK(o_.size.empty() || o_.size.size() == 1 || o_.size.size() == k, InputError)
        << who << ": size " << shape_str(o_.size) << " has " << o_.size.size() << " entries for "
        << k << " axes; give one per axis or one for all";
    for (const auto& [lo, hi] : o_.padding)
        SJ_CHECK(lo >= 0 && hi >= 0, InputError)
            << who << ": padding must be >= 0, got (" << lo << ", " << hi << ")";
    for (int64_t s : o_.size)
        SJ_CHECK(s >= 1, InputError)
            << who << ": size " << shape_str(o_.size) << " must be >= 1 everywhere";
}

Tensor RandomCrop::forward(const Tensor& x, Mode mode) const {
    const char* who = "nn::RandomCrop";
    const Axes axes = example_axes(x, o_.axes, who);
    const int rank = x.rank();
    for (int d = 1; d < rank; ++d)
        SJ_CHECK(x.dim(d) >= 0, ShapeError)
            << who << ": input " << x.name() << " " << x.type_str()
            << " needs every dim but the batch known when the graph is built";
    // per input dim: pads, crop size and the number of offsets beyond the first
    std::vector<int64_t> lo(rank, 0), hi(rank, 0), size(x.shape().begin(), x.shape().end()),
        range(rank, 0);
    bool identity_in_eval = true;
    for (size_t k = 0; k < axes.size(); ++k) {
        const int64_t d = axes[k], n = x.dim(d);
        if (!o_.padding.empty())
            std::tie(lo[d], hi[d]) = per_axis(o_.padding, k);
        if (!o_.size.empty())
            size[d] = per_axis(o_.size, k);
        range[d] = lo[d] + hi[d] + n - size[d];
        SJ_CHECK(range[d] >= 0, ShapeError)
            << who << ": a crop of size " << size[d] << " does not fit axis " << d << " of "
            << x.name() << " " << x.type_str() << " padded by (" << lo[d] << ", " << hi[d] << ")";
        identity_in_eval &= size[d] == n && lo[d] == hi[d];
    }
    bool fixed = true; // every offset is 0: nothing to draw
    for (int64_t d : axes)
        fixed &= range[d] == 0;
    if (identity_in_eval && (mode == Mode::Eval || fixed))
        return x;
    if (mode == Mode::Eval || fixed) {
        std::vector<int64_t> start(rank, 0), stop(size);
        stop[0] = Index::kEnd;
        for (int64_t d : axes)
            start[d] = range[d] / 2, stop[d] = start[d] + size[d];
        return slice(pad(x, lo, hi, 0.0), start, stop);
    }
    const uint64_t seed = detail::next_call_seed(o_.seed, *calls_);
    // One offset per example and axis, uniform on {0..range}: floor(u * (range + 1)), clamped
    // against u rounding up to 1.
    Tensor probe = batch_probe(x);
    Tensor padded = pad(x, lo, hi, 0.0);
    std::vector<int64_t> stride(rank, 1);
    for (int d = rank - 2; d >= 0; --d)
        stride[d] = stride[d + 1] * (x.dim(d + 1) + lo[d + 1] + hi[d + 1]);
    auto along = [&](const Tensor& v, int d) { // [len] -> [1, ..., len at d, ..., 1]
        Shape s(static_cast<size_t>(rank), 1);
        s[d] = -1;
        return reshape(v, s);
    };
    // Gather from the flattened padded batch: element (n, i1, i2, ...) of the crop is
    // padded[n, i1 + off1[n], i2 + off2[n], ...] (offsets only on `axes`).
    Tensor n_idx = cast(cumsum(ones_like(cast(probe, DType::I64)), 0), DType::I64) -
                   scalar(1.0, DType::I64); // [N]: 0, 1, ..., N-1
    Tensor index = along(n_idx, 0) * scalar(double(stride[0]), DType::I64);
    for (int d = 1; d < rank; ++d) {
        Tensor pos = along(arange(size[d], DType::I64), d);
        auto k = std::find(axes.begin(), axes.end(), d);
        if (k != axes.end() && range[d] > 0) {
            const uint64_t s = detail::mix_seed(seed, uint64_t(k - axes.begin()));
            Tensor u = random::uniform_like(probe, 0.0, 1.0, DType::F32, s);
            Tensor off =
                cast(minimum(floor(u * double(range[d] + 1)), double(range[d])), DType::I64);
            pos = pos + along(off, 0);
        }
        index = index + pos * scalar(double(stride[d]), DType::I64);
    }
    return gather(reshape(padded, {-1}), index, 0);
}

} // namespace sj::nn
