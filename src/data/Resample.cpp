// resample_images: host-side resizing of a list of [C, H, W] images into one [N, C, H', W'] batch.
#include <symjax/Data.h>
#include <symjax/Error.h>

#include <algorithm>
#include <cmath>

namespace sj::data {

namespace {

/// Where output sample j of m reads an input of n samples: j (n - 1) / (m - 1) (align_corners).
struct Taps {
    std::vector<int64_t> lo, hi;
    std::vector<double> t; // weight of hi
};

Taps taps(int64_t n, int64_t m, interpolation::Method method) {
    Taps k;
    for (int64_t j = 0; j < m; ++j) {
        if (method == interpolation::Method::Nearest) {
            // round(j (n - 1) / (m - 1)), halves up, in exact integers
            const int64_t i = m == 1 ? 0 : (2 * j * (n - 1) + (m - 1)) / (2 * (m - 1));
            k.lo.push_back(i), k.hi.push_back(i), k.t.push_back(0.0);
            continue;
        }
        const double src = m == 1 ? 0.0 : double(j * (n - 1)) / double(m - 1);
        const int64_t i = std::min(static_cast<int64_t>(std::floor(src)), n - 1);
        k.lo.push_back(i), k.hi.push_back(std::min(i + 1, n - 1)), k.t.push_back(src - double(i));
    }
    return k;
}

} // namespace

Array resample_images(const std::vector<Array>& images, const Shape& spatial_shape,
                      interpolation::Method method, bool keep_aspect) {
    const char* who = "data::resample_images";
    SJ_CHECK(!images.empty(), InputError) << who << ": no images";
    SJ_CHECK(spatial_shape.size() == 2 && spatial_shape[0] >= 1 && spatial_shape[1] >= 1,
             ShapeError)
        << who << ": spatial_shape " << shape_str(spatial_shape) << " must be {H, W} >= 1";
    const Array& first = images[0];
    SJ_CHECK(first.defined() && first.rank() == 3, ShapeError)
        << who << ": image 0 " << (first.defined() ? first.type_str() : "(undefined)")
        << " must be [C, H, W]";
    const DType dt = first.dtype();
    SJ_CHECK(dt != DType::Bool, TypeError)
        << who << ": images must be numeric, got " << first.type_str();
    const int64_t n = static_cast<int64_t>(images.size()), c = first.shape()[0];
    const int64_t th = spatial_shape[0], tw = spatial_shape[1];
    Array out = Array::full(DType::F64, {n, c, th, tw}, 0.0);
    double* o = out.data<double>();
    for (int64_t e = 0; e < n; ++e) {
        const Array& im = images[e];
        SJ_CHECK(im.defined() && im.rank() == 3 && im.shape()[0] == c && im.dtype() == dt,
                 ShapeError)
            << who << ": image " << e << " " << (im.defined() ? im.type_str() : "(undefined)")
            << " must be [" << c << ", H, W] of dtype " << dtype_name(dt) << " like image 0 "
            << first.type_str();
        const int64_t h = im.shape()[1], w = im.shape()[2];
        SJ_CHECK(h >= 1 && w >= 1, ShapeError)
            << who << ": image " << e << " " << im.type_str() << " is empty";
        int64_t nh = th, nw = tw;
        if (keep_aspect) {
            // scale by min(th / h, tw / w) in exact integers: the limiting side fills its target
            if (th * w <= tw * h)
                nw = std::max<int64_t>(w * th / h, 1);
            else
                nh = std::max<int64_t>(h * tw / w, 1);
        }
        const int64_t top = (th - nh) / 2, left = (tw - nw) / 2;
        const Taps ky = taps(h, nh, method), kx = taps(w, nw, method);
        const Array src = im.astype(DType::F64);
        const double* s = src.data<double>();
        for (int64_t ch = 0; ch < c; ++ch)
            for (int64_t i = 0; i < nh; ++i) {
                const double* r0 = s + (ch * h + ky.lo[i]) * w;
                const double* r1 = s + (ch * h + ky.hi[i]) * w;
                double* dst = o + ((e * c + ch) * th + top + i) * tw + left;
                for (int64_t j = 0; j < nw; ++j) {
                    const int64_t a = kx.lo[j], b = kx.hi[j];
                    const double u = kx.t[j], v = ky.t[i];
                    // exact at the samples: a weight of 0 contributes nothing
                    const double top_v = u == 0.0 ? r0[a] : r0[a] * (1 - u) + r0[b] * u;
                    const double bot_v = u == 0.0 ? r1[a] : r1[a] * (1 - u) + r1[b] * u;
                    dst[j] = v == 0.0 ? top_v : top_v * (1 - v) + bot_v * v;
                }
            }
    }
    if (is_float(dt))
        return out.astype(dt);
    for (int64_t i = 0; i < out.size(); ++i)
        o[i] = std::round(o[i]);
    return out.astype(dt);
}

} // namespace sj::data
