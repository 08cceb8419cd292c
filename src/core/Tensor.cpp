// Tensor: handle methods and NumPy-style subscripts.
#include "../ops/OpDef.h"

#include <symjax/Ops.h>
#include <symjax/Tensor.h>
#include <symjax/ir/Node.h>

#include <algorithm>

namespace sj {

namespace {
const Node& node_of(const NodePtr& n) {
    SJ_CHECK(n, Error) << "use of an undefined (default-constructed) Tensor";
    return *n;
}
} // namespace

DType Tensor::dtype() const { return node_of(node_).dtype(); }
const Shape& Tensor::shape() const { return node_of(node_).shape(); }
int Tensor::rank() const { return node_of(node_).rank(); }
int64_t Tensor::dim(int64_t axis) const { return shape()[normalize_axis(axis, rank(), "dim")]; }
std::string Tensor::name() const { return node_ ? node_->describe() : "<undefined>"; }
Tensor Tensor::named(const std::string& name) const {
    node_of(node_);
    return Tensor(with_name(node_, name));
}
std::string Tensor::type_str() const {
    return sj::type_str(node_of(node_).type());
}

Tensor Tensor::operator[](Index i) const {
    return (*this)[std::vector<Index>{i}];
}
Tensor Tensor::operator[](std::initializer_list<Index> idx) const {
    return (*this)[std::vector<Index>(idx)];
}

Tensor Tensor::operator[](const std::vector<Index>& idx) const {
    if (std::any_of(idx.begin(), idx.end(), [](const Index& i) { return i.is_tensor(); }))
        return detail::advanced_subscript(*this, idx);
    int r = rank();
    SJ_CHECK(idx.size() <= size_t(r), ShapeError)
        << "subscript of " << name() << " " << type_str() << ": " << idx.size()
        << " indices for rank " << r;
    std::vector<int64_t> start(r, 0), stop(r, Index::kEnd), step(r, 1);
    Axes drop;
    for (size_t i = 0; i < idx.size(); ++i) {
        const Index& ix = idx[i];
        int64_t d = shape()[i];
        if (ix.is_range) {
            // a negative step reverses the dim (Note [Negative steps] in src/ops/Movement.cpp)
            start[i] = ix.start;
            stop[i] = ix.stop;
            step[i] = ix.step;
        } else {
            int64_t k = ix.start;
            if (d >= 0) {
                SJ_CHECK(k >= -d && k < d, ShapeError)
                    << "subscript of " << name() << " " << type_str() << ": index " << k
                    << " out of range for dim " << i << " of size " << d;
                if (k < 0)
                    k += d;
            }
            // on a dim of unknown size, [k, k + 1) counts from the end when k < 0 (k = -1: to
            // the end), and slice's check at call time rejects k outside [-size, size)
            start[i] = k;
            stop[i] = k == -1 ? Index::kEnd : k + 1;
            drop.push_back(int64_t(i));
        }
    }
    uint64_t index_dims = 0;
    for (int64_t a : drop)
        if (a < 64)
            index_dims |= uint64_t(1) << a;
    Tensor s = detail::index_slice(*this, start, stop, step, index_dims);
    if (drop.empty())
        return s;
    // dropped dims are size 1 now; remove them
    Shape out;
    int unknown = 0;
    for (int i = 0; i < r; ++i)
        if (std::find(drop.begin(), drop.end(), i) == drop.end()) {
            out.push_back(s.shape()[i]);
            unknown += s.shape()[i] < 0;
        }
    if (unknown <= 1)
        return reshape(s, out);
    // several unknown dims: summing over the dropped dims (size 1) removes them without sizes
    return s.dtype() == DType::Bool ? any(s, drop) : sum(s, drop);
}

} // namespace sj
