// Node: the immutable, hash-consed graph IR. Tensor (Tensor.h) is the user's handle to one.
#pragma once

#include <symjax/ir/Attrs.h>
#include <symjax/ir/Op.h>

#include <atomic>
#include <memory>
#include <string>
#include <vector>

namespace sj {

class Node;
using NodePtr = std::shared_ptr<const Node>;

/// The static type of a value: dtype and shape (dims may be -1).
struct TensorType {
    DType dtype = DType::F32;
    Shape shape;
    bool operator==(const TensorType&) const = default;
};
std::string type_str(const TensorType& t); // "f32[2, -1]"

/// An op applied to inputs. Nodes are interned: Node::make with the same opcode, attributes
/// and inputs returns the same node, so common subexpressions are shared for free.
/// The output type is inferred (and checked) when the node is made, so a shape error is
/// raised at the line that built the expression.
class Node : public std::enable_shared_from_this<Node> {
public:
    static NodePtr make(Op op, Attrs attrs, std::vector<NodePtr> inputs);
    /// The named twin of make(op, attrs, inputs): a node of its own, interned with its name, so
    /// that naming one expression never renames an equal expression built elsewhere
    /// (Note [Names and interning] in src/core/Node.cpp).
    static NodePtr make_named(Op op, Attrs attrs, std::vector<NodePtr> inputs, std::string name);
    /// A window op whose operands or result are in a target's layout (`layout`: a mask, Note
    /// [Target layouts] in src/core/Node.cpp); only a target's layout pass makes these.
    static NodePtr make_laid_out(Op op, Attrs attrs, std::vector<NodePtr> inputs, int64_t layout,
                                 std::string name = {});
    /// n's op, attributes, name and layout over new inputs (what a rewrite or a clone makes).
    static NodePtr rebuild(const Node& n, std::vector<NodePtr> inputs);

private:
    struct Key { // only intern() makes nodes (Note [Node memory] in src/core/Node.cpp)
        explicit Key() = default;
    };

public:
    Node(Key, Op op, Attrs attrs, std::vector<NodePtr> inputs, TensorType type, uint64_t hash);
    ~Node();
    Node(const Node&) = delete;
    Node& operator=(const Node&) = delete;

    Op op() const { return op_; }
    const Attrs& attrs() const { return attrs_; }
    /// Which operands (bit i: input i) and whether the result (bit 3) are in the target's layout
    /// rather than the op's logical one; 0 in every graph a user builds (Note [Target layouts]).
    int64_t layout() const { return layout_; }
    template <class A> const A& attr() const { return std::get<A>(attrs_); }
    const std::vector<NodePtr>& inputs() const { return inputs_; }
    const NodePtr& input(size_t i) const { return inputs_[i]; }
    /// input(i).get(), read from the node's first cache line for the first inputs: what a walk
    /// over a graph larger than the caches uses (one miss per node instead of two).
    const Node* input_ptr(size_t i) const { return i < kNearInputs ? near_[i] : inputs_[i].get(); }
    size_t num_inputs() const { return inputs_.size(); }
    const TensorType& type() const { return type_; }
    DType dtype() const { return type_.dtype; }
    const Shape& shape() const { return type_.shape; }
    int rank() const { return static_cast<int>(type_.shape.size()); }
    uint64_t hash() const { return hash_; }
    /// Creation order, unique per live node: a stable tie-breaker for printing and sorting.
    uint64_t id() const { return id_; }
    bool is(Op o) const { return op_ == o; }

    /// The user's name: a leaf's name, or a name given with Tensor::named; else "".
    const std::string& name() const { return name_; }
    /// Scope path active when the node was first made ("model/dense").
    const std::string& scope() const { return scope_; }
    /// For messages: the name if there is one, else a short expression such as "mul(x, W)".
    std::string describe(int depth = 2) const;

    /// Renames a leaf in place (a leaf has an identity of its own). Other nodes are shared:
    /// use with_name().
    void set_name(std::string n) const;

    /// Keeps `data` with this node, under `tag` (one slot per tag, replaced by a second call),
    /// for exactly as long as the node lives: a layer above the IR (nn's state updates) ties
    /// what it knows about a value to the value's lifetime (Note [Node attachments] in
    /// src/core/Node.cpp). `data` must not hold this node, or neither is ever freed.
    void attach(const void* tag, std::shared_ptr<void> data) const;
    /// What attach(tag, ...) keeps with this node, or null.
    std::shared_ptr<void> attachment(const void* tag) const;

private:
    static NodePtr intern(Op op, Attrs attrs, std::vector<NodePtr> inputs, std::string name,
                          int64_t layout = 0);
    friend struct NodeInterner;
    // what every walk reads first, in the block's first cache line, next to the reference
    // counts (Note [Node memory] in src/core/Node.cpp)
    Op op_;
    mutable std::atomic<bool> attached_{false}; // attach() was called (in op_'s padding)
    uint64_t id_;
    std::vector<NodePtr> inputs_;
    static constexpr size_t kNearInputs = 2;
    const Node* near_[kNearInputs] = {}; // the first inputs' addresses, beside the counts
    int64_t layout_ = 0;
    Attrs attrs_;
    TensorType type_;
    uint64_t hash_;
    mutable std::string name_;
    std::string scope_;
};

/// `n` carrying `name`: n itself when it already does; a leaf renamed in place; otherwise the
/// named twin (Node::make_named), leaving n and every handle to it as they were.
NodePtr with_name(const NodePtr& n, const std::string& name);

/// Number of live nodes (for tests of memory behaviour).
size_t live_node_count();
/// Every live node, in creation order (get_ops and Scope::ops read it; the graph owns the nodes).
std::vector<NodePtr> live_nodes();

/// Nodes reachable from `roots`, each after all its inputs (iterative: no recursion limit).
std::vector<const Node*> topo_order(const std::vector<const Node*>& roots);

/// The value of n when it is a Constant (or a broadcast of one) holding a single repeated value;
/// false otherwise (rewrite patterns and gradient rules read it).
bool splat_value(const Node& n, double* value);

} // namespace sj
