// Tensor: the user's handle to a graph node, with operators, slicing and lazy evaluation.
#pragma once

#include <symjax/Array.h>
#include <symjax/DType.h>
#include <symjax/Shape.h>

#include <initializer_list>
#include <memory>
#include <limits>
#include <string>
#include <utility>
#include <vector>

namespace sj {

class Node; // the graph IR: include/symjax/ir/Node.h
using NodePtr = std::shared_ptr<const Node>;

class Tensor;
/// Substitutions for clone()/eval(): replace the first of each pair by the second.
using Givens = std::vector<std::pair<Tensor, Tensor>>;

/// One index of a subscript: an integer (drops the dim), a range (keeps it), or an integer tensor
/// (NumPy advanced indexing: `x[t]` gathers along that dim; docs/ops.md, "Indexing").
/// Ranges are Python's slices: negative bounds count from the end, bounds past either end are
/// clamped, and a negative step walks backwards (`sl(-1, Index::kBegin, -1)` is `::-1`).
struct Index {
    /// A stop past the last element (and, with a negative step, a start at the last one).
    static constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();
    /// A stop before the first element: with a negative step, the range runs through index 0.
    static constexpr int64_t kBegin = std::numeric_limits<int64_t>::min();
    Index(int64_t i) : start(i), is_range(false) {} // NOLINT: implicit by design
    Index(int i) : Index(int64_t(i)) {}             // NOLINT
    Index(int64_t s, int64_t e, int64_t st) : start(s), stop(e), step(st), is_range(true) {}
    /// An integer tensor of indices (negative ones count from the end of the dim).
    Index(const Tensor& t); // NOLINT: implicit by design (defined below Tensor)
    int64_t start = 0, stop = kEnd, step = 1;
    bool is_range = true;
    NodePtr tensor; // set for a tensor index (then is_range is false and start unused)
    bool is_tensor() const { return tensor != nullptr; }
    /// sl(): the whole dim.
    bool is_full() const { return is_range && start == 0 && stop == kEnd && step == 1; }
};
/// A range subscript, Python style: sl() is ":", sl(1, -1) is "1:-1", sl(0, Index::kEnd, 2) "::2",
/// sl(-1, Index::kBegin, -1) "::-1", sl(4, 0, -2) "4:0:-2".
inline Index sl(int64_t start = 0, int64_t stop = Index::kEnd, int64_t step = 1) {
    return Index(start, stop, step);
}

class IndexedRef;

/// How an indexed update or a scatter combines an update with the element it lands on: replace
/// it, add, multiply, or keep the minimum or the maximum (NaN propagates, as minimum/maximum).
enum class ScatterMode : uint8_t { Set, Add, Mul, Min, Max };

/// A symbolic tensor. Cheap to copy; building an expression builds graph nodes.
class Tensor {
public:
    Tensor() = default;
    explicit Tensor(NodePtr node) : node_(std::move(node)) {}
    /// A constant from a host array.
    explicit Tensor(const Array& value);

    bool defined() const { return static_cast<bool>(node_); }
    const NodePtr& node() const { return node_; }
    DType dtype() const;
    const Shape& shape() const;
    int rank() const;
    /// Size of dim `axis` (negative counts from the end); -1 when unknown until call time.
    int64_t dim(int64_t axis) const;
    /// The user's name, or a short description of the expression.
    std::string name() const;
    /// This tensor under a name used in messages and graph dumps. A placeholder, variable or
    /// constant is renamed in place; any other expression gets a named twin, so naming never
    /// renames an equal expression built elsewhere: use the returned tensor.
    [[nodiscard]] Tensor named(const std::string& name) const;
    std::string type_str() const;

    /// Subscripts: x[2], x[sl(1, 3)], x[{sl(), 0}] (NumPy basic indexing; negative indices count
    /// from the end; dims not named are kept whole), and x[t], x[{i, sl(), j}] with integer
    /// tensors (NumPy advanced indexing: a gather; docs/ops.md, "Indexing and indexed updates").
    Tensor operator[](Index i) const;
    Tensor operator[](std::initializer_list<Index> idx) const;
    Tensor operator[](const std::vector<Index>& idx) const;

    /// Functional indexed updates (JAX's `x.at[idx]`): `x.at({sl(1, 3), t}).add(v)` is a new
    /// tensor, x with v added at those positions; x itself is unchanged (docs/ops.md).
    IndexedRef at(Index i) const;
    IndexedRef at(std::initializer_list<Index> idx) const;
    IndexedRef at(const std::vector<Index>& idx) const;

    /// Evaluates the tensor with the reference interpreter, after substituting `givens`.
    /// Every placeholder it depends on must be given a constant. Random ops draw with counter 0.
    Array eval(const Givens& givens = {}) const;

    /// Same node (graphs are hash-consed, so same expression).
    bool same(const Tensor& o) const { return node_ == o.node_; }

private:
    NodePtr node_;
};

inline Index::Index(const Tensor& t) : is_range(false), tensor(t.node()) {}

/// `x.at(idx)`: the positions of x that the subscript x[idx] reads, to update functionally.
/// Each method returns a new tensor of x's shape and dtype; v broadcasts to x[idx]'s shape.
/// Repeated tensor indices accumulate for add, mul, min and max (as JAX); for set, one of the
/// repeated updates wins, which one is unspecified (docs/ops.md, "Indexed updates").
class IndexedRef {
public:
    IndexedRef(Tensor x, std::vector<Index> idx) : x_(std::move(x)), idx_(std::move(idx)) {}
    /// x[idx] (the same as the subscript).
    Tensor get() const;
    /// x with x[idx] replaced by v.
    Tensor set(const Tensor& v) const;
    Tensor set(double v) const;
    /// x with v added to x[idx].
    Tensor add(const Tensor& v) const;
    Tensor add(double v) const;
    /// x with x[idx] multiplied by v.
    Tensor mul(const Tensor& v) const;
    Tensor mul(double v) const;
    /// x with x[idx] replaced by minimum(x[idx], v).
    Tensor min(const Tensor& v) const;
    Tensor min(double v) const;
    /// x with x[idx] replaced by maximum(x[idx], v).
    Tensor max(const Tensor& v) const;
    Tensor max(double v) const;

    const Tensor& tensor() const { return x_; }
    const std::vector<Index>& indices() const { return idx_; }

private:
    Tensor x_;
    std::vector<Index> idx_;
};

} // namespace sj
