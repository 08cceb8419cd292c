// Leaves of a graph: Placeholder (a function input) and Variable (named persistent state).
#pragma once

#include <symjax/Tensor.h>

#include <optional>
#include <string>
#include <vector>

namespace sj {

/// A function input. Dims may be -1 ("any size"), bound when the function is called.
class Placeholder : public Tensor {
public:
    Placeholder(const Shape& shape, DType dtype, const std::string& name);
    /// Wraps a tensor that is a placeholder node (throws otherwise).
    explicit Placeholder(const Tensor& t);
};

namespace detail {
struct VariableState; // include/symjax/ir/VariableState.h
} // namespace detail

/// Named, persistent state: a buffer that lives between function calls. Its name is qualified by
/// the current Scope and made unique ("W", "W_1", ...). Functions read it and, through updates,
/// write it.
class Variable : public Tensor {
public:
    Variable() = default;
    /// A variable holding `init` (copied).
    Variable(const Array& init, const std::string& name, bool trainable = true);
    /// A variable holding `init`: a temporary whose buffer nobody else holds is adopted, not
    /// copied (e.g. `Variable(Array(f32, shape), "v")`).
    Variable(Array&& init, const std::string& name, bool trainable = true);
    /// A variable initialised by evaluating `init` (a graph without placeholders, e.g. a random
    /// draw); reset() evaluates it again.
    Variable(const Tensor& init, const std::string& name, bool trainable = true);
    /// Wraps a tensor that is a variable node (throws otherwise).
    explicit Variable(const Tensor& t);

    /// A copy of the current value.
    Array value() const;
    /// Replaces the value (dtype and shape must match; converted from other dtypes of the same
    /// shape only when `allow_cast`).
    void assign(const Array& v, bool allow_cast = false) const;
    /// Back to the initial value (re-evaluating an initialiser expression).
    void reset() const;
    bool trainable() const;
    /// The full, unique name ("model/dense/W").
    const std::string& full_name() const;
    detail::VariableState& state() const;
};

/// Live variables whose full name matches the glob (`*` and `?`; "*" matches all), in creation
/// order; with trainable set, only those whose flag equals it.
std::vector<Variable> get_variables(const std::string& glob = "*", std::optional<bool> trainable = {});
/// Live op nodes (not leaves) whose full name matches the glob, in creation order. An op's full
/// name is the scope it was first made in and its name, or its op's name when it has none:
/// "model/dense/logits" (named with Tensor::named), "model/dense/matmul".
std::vector<Tensor> get_ops(const std::string& glob = "*");
/// Live placeholders whose full name ("model/x") matches the glob, in creation order.
std::vector<Placeholder> get_placeholders(const std::string& glob = "*");
/// The variables `outputs` depend on (reachable in their graph, stop_gradient included), each
/// once, in graph order; with trainable set, only those whose flag equals it.
std::vector<Variable> variables_of(const std::vector<Tensor>& outputs,
                                   std::optional<bool> trainable = {});
/// Resets every variable matching the glob.
void reset_variables(const std::string& glob = "*");
/// True when `name` matches `glob` (fnmatch-style, '*' also matches '/').
bool glob_match(const std::string& glob, const std::string& name);

} // namespace sj
