// Checks and reductions shared by the loss and metric families.
#pragma once

#include <symjax/Ops.h>

namespace sj::nn::losses::detail {

/// x converted to dtype (x itself when it already has it).
inline Tensor as_dtype(const Tensor &x, DType dtype) {
    return x.dtype() == dtype ? x : cast(x, dtype);
}

/// The mean over every axis but the first (rank <= 1: l itself).
inline Tensor per_example(const Tensor &l) {
    if (l.rank() <= 1)
        return l;
    Axes axes;
    for (int a = 1; a < l.rank(); ++a)
        axes.push_back(a);
    return mean(l, axes);
}

inline void check_float(const Tensor &x, const char *what) {
    SJ_CHECK(x.defined() && is_float(x.dtype()), TypeError)
        << "nn::losses::" << what << ": "
        << (x.defined() ? x.name() + " " + x.type_str() : "undefined") << " must be f32 or f64";
}

/// Float [..., C] with C known when the graph is built.
inline void check_logits(const Tensor &logits, const char *what) {
    check_float(logits, what);
    SJ_CHECK(logits.rank() >= 1 && logits.dim(-1) >= 1, ShapeError)
        << "nn::losses::" << what << ": " << logits.name() << " " << logits.type_str()
        << " needs a class axis (the last) whose size is known when the graph is built";
}

/// Integer labels shaped like logits without its last axis.
inline void check_int_labels(const Tensor &labels, const Tensor &logits, const char *what) {
    SJ_CHECK(labels.defined() && is_int(labels.dtype()), TypeError)
        << "nn::losses::" << what << ": labels " << labels.name() << " " << labels.type_str()
        << " must be integer class indices";
    bool ok = labels.rank() + 1 == logits.rank();
    for (int a = 0; ok && a < labels.rank(); ++a)
        ok = labels.dim(a) == logits.dim(a) || labels.dim(a) == -1 || logits.dim(a) == -1;
    SJ_CHECK(ok, ShapeError) << "nn::losses::" << what << ": labels " << labels.name() << " "
                             << labels.type_str() << " must be shaped like " << logits.name() << " "
                             << logits.type_str() << " without its last axis";
}

inline void check_same_shape(const Tensor &a, const Tensor &b, const char *what) {
    bool ok = a.defined() && b.defined() && a.rank() == b.rank();
    for (int i = 0; ok && i < a.rank(); ++i)
        ok = a.dim(i) == b.dim(i) || a.dim(i) == -1 || b.dim(i) == -1;
    SJ_CHECK(ok, ShapeError) << "nn::losses::" << what << ": " << a.name() << " " << a.type_str()
                             << " and " << b.name() << " " << b.type_str()
                             << " must have the same shape";
}

} // namespace sj::nn::losses::detail
