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

/// One index of a subscript: an integer (drops the dim), a range (keeps it), or all.
struct Index {
    static constexpr int64_t kEnd = std::numeric_limits<int64_t>::max();
    Index(int64_t i) : start(i), is_range(false) {} // NOLINT: implicit by design
    Index(int i) : Index(int64_t(i)) {}             // NOLINT
    Index(int64_t s, int64_t e, int64_t st) : start(s), stop(e), step(st), is_range(true) {}
    int64_t start = 0, stop = kEnd, step = 1;
    bool is_range = true;
};
/// A range subscript, Python style: sl() is ":", sl(1, -1) is "1:-1", sl(0, Index::kEnd, 2) "::2".
inline Index sl(int64_t start = 0, int64_t stop = Index::kEnd, int64_t step = 1) {
    return Index(start, stop, step);
}

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
    /// from the end; dims not named are kept whole).
    Tensor operator[](Index i) const;
    Tensor operator[](std::initializer_list<Index> idx) const;
    Tensor operator[](const std::vector<Index>& idx) const;

    /// Evaluates the tensor with the reference interpreter, after substituting `givens`.
    /// Every placeholder it depends on must be given a constant. Random ops draw with counter 0.
    Array eval(const Givens& givens = {}) const;

    /// Same node (graphs are hash-consed, so same expression).
    bool same(const Tensor& o) const { return node_ == o.node_; }

private:
    NodePtr node_;
};

} // namespace sj
