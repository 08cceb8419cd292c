// Upsampling layers: Upsample1D and Upsample2D on interpolation::resize.
#include <symjax/nn/Upsample.h>

namespace sj::nn {

Upsample1D::Upsample1D(int64_t scale, UpsampleOptions options) : scale_(scale), o_(options) {
    SJ_CHECK(scale >= 1, InputError) << "nn::Upsample1D: scale must be >= 1, got " << scale;
}

Tensor Upsample1D::forward(const Tensor& x, Mode) const {
    SJ_CHECK(x.rank() == 3 && x.dim(2) >= 1, ShapeError)
        << "nn::Upsample1D: input " << x.name() << " " << x.type_str()
        << " must be [N, C, W] with W known when the graph is built";
    return interpolation::resize(x, {x.dim(2) * scale_}, o_.method, o_.align_corners);
}

Upsample2D::Upsample2D(Axes scale, UpsampleOptions options)
    : scale_(std::move(scale)), o_(options) {
    SJ_CHECK(scale_.size() == 1 || scale_.size() == 2, InputError)
        << "nn::Upsample2D: scale must have 1 or 2 entries, got " << scale_.size();
    for (int64_t s : scale_)
        SJ_CHECK(s >= 1, InputError) << "nn::Upsample2D: scale must be >= 1, got " << s;
    if (scale_.size() == 1)
        scale_.push_back(scale_[0]);
}

Tensor Upsample2D::forward(const Tensor& x, Mode) const {
    SJ_CHECK(x.rank() == 4 && x.dim(2) >= 1 && x.dim(3) >= 1, ShapeError)
        << "nn::Upsample2D: input " << x.name() << " " << x.type_str()
        << " must be [N, C, H, W] with H and W known when the graph is built";
    return interpolation::resize(x, {x.dim(2) * scale_[0], x.dim(3) * scale_[1]}, o_.method,
                                 o_.align_corners);
}

} // namespace sj::nn
