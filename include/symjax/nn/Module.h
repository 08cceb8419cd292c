// Modules: layers that own named parameters, Sequential, and state updates carried by the graph.
#pragma once

#include <symjax/Function.h>
#include <symjax/Variable.h>

#include <memory>
#include <string>
#include <type_traits>
#include <vector>

namespace sj::nn {

/// How a layer behaves, chosen when the graph is built (never a runtime flag): dropout is active
/// and batch norm uses and updates batch statistics in `train`; both are deterministic in `eval`.
enum class Mode { Train, Eval };

/// A layer: owns named Variables, created when the module is constructed, and builds graph when
/// called. Calling a module on several inputs reuses the same Variables (weight sharing). Copies
/// of a module share its Variables.
///
///   sj::Scope s("model");
///   nn::Dense d(784, 10);           // variables "model/dense/W" and "model/dense/b"
///   Tensor y1 = d(x1), y2 = d(x2);  // both read the same W and b
class Module {
public:
    virtual ~Module() = default;

    /// The layer applied to x. The mode defaults to train (as PyTorch modules do).
    Tensor operator()(const Tensor &x, Mode mode = Mode::Train) const { return forward(x, mode); }
    /// What operator() computes; each layer defines it.
    virtual Tensor forward(const Tensor &x, Mode mode) const = 0;

    /// This module's variables, then its children's, in creation order (no duplicates).
    std::vector<Variable> variables() const;
    /// The trainable ones among variables().
    std::vector<Variable> trainable_variables() const;
    /// Scope path of the module's variables ("model/dense"); "" for modules that own none.
    const std::string &scope() const { return scope_; }

protected:
    Module() = default;
    /// Picks the scope of this module's variables: `kind` under the current scope, or kind_1,
    /// kind_2, ... when a live variable already uses that path. Call before add_variable.
    void open_scope(const std::string &kind);
    /// Creates a variable named scope() + "/" + name.
    Variable add_variable(const std::string &name, const Tensor &init, bool trainable = true);
    Variable add_variable(const std::string &name, const Array &init, bool trainable = true);
    /// Registers a sub-module (its variables join variables()).
    void add_child(std::shared_ptr<const Module> child);
    const std::vector<std::shared_ptr<const Module>> &children() const { return children_; }

private:
    std::string scope_;
    std::vector<Variable> vars_;
    std::vector<std::shared_ptr<const Module>> children_;
};

/// A handle to any module, so lists of layers of different types can be written in braces.
class AnyModule {
public:
    template <class M, class = std::enable_if_t<std::is_base_of_v<Module, std::decay_t<M>>>>
    AnyModule(M &&m) // NOLINT: implicit by design
        : ptr_(std::make_shared<std::decay_t<M>>(std::forward<M>(m))) {}
    AnyModule(std::shared_ptr<const Module> m) : ptr_(std::move(m)) {} // NOLINT
    const std::shared_ptr<const Module> &ptr() const { return ptr_; }

private:
    std::shared_ptr<const Module> ptr_;
};

/// Layers applied one after the other:
///   nn::Sequential net{nn::Dense(784, 128), nn::ReLU(), nn::Dense(128, 10)};
///   Tensor logits = net(x, nn::Mode::Train);
class Sequential : public Module {
public:
    Sequential() = default;
    Sequential(std::initializer_list<AnyModule> layers);
    explicit Sequential(const std::vector<AnyModule> &layers);
    /// Appends a layer.
    Sequential &add(AnyModule layer);
    size_t size() const { return children().size(); }
    /// The i-th layer.
    const Module &operator[](size_t i) const;
    Tensor forward(const Tensor &x, Mode mode) const override;
};

// Note [State updates]
// Some layers change state when they run in training mode (batch norm's running statistics).
// There is no global update list: the layer attaches its updates to the node it outputs, which
// keeps them for exactly its own lifetime (Note [Node attachments] in src/core/Node.cpp: a
// dropped network leaves none of its update graphs behind). state_updates(t) walks the graph
// reachable from t with topo_order and collects the updates attached to any node on the way. When
// one variable is updated by several reachable nodes (a layer called on two inputs in training
// mode) the updates compose in graph order: the later update reads the earlier one's result instead
// of the variable, so two calls advance a running mean twice, as two sequential steps would. Graphs
// rebuilt by clone() are new nodes and carry no attached updates.

/// Attaches `updates` to t's node: state_updates(y) of every y that depends on t includes them.
/// Attaching the same variable and value to the same node again is a no-op.
void attach_state_updates(const Tensor &t, const Updates &updates);
/// The state updates attached to the nodes reachable from t (see Note [State updates]).
Updates state_updates(const Tensor &t);
Updates state_updates(const std::vector<Tensor> &ts);

} // namespace sj::nn

namespace sj {
// So that `state_updates(loss)` reads as in the design's example, next to sj::function.
using nn::state_updates;
} // namespace sj
