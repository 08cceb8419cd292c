// Leaves of a graph: Placeholder (a function input) and Variable (named persistent state).
#pragma once

#include <symjax/Tensor.h>

#include <mutex>
#include <shared_mutex>
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
/// The storage behind a Variable, shared by its handles and the graph nodes that read it.
struct VariableState {
    std::string name;
    DType dtype = DType::F32;
    Shape shape;
    bool trainable = true;
    Array value;
    Array initial;     // the value reset() restores, unless init_expr is set
    Tensor init_expr;  // an initialiser graph (e.g. a random draw) re-evaluated by reset()
    std::mutex mu;     // guards `value` (the handle) against concurrent assign/commit
    /// Held exclusively by a call that updates the variable (its kernels may write the buffer in
    /// place) from before it reads the value until its commit, and shared by calls and readers
    /// that read it: a reader sees one step's values (Note [Consistent snapshots]).
    std::shared_mutex rw;
    std::string base; // the requested name; `name` is base or base_<suffix>
    int suffix = 0;
    VariableState() = default;
    VariableState(const VariableState&) = delete;
    VariableState& operator=(const VariableState&) = delete;
    ~VariableState(); // gives the name back to the table
};

/// Copies of the variables' values, all from one step: no call that updates any of them runs
/// between the copies (save_variables uses it).
std::vector<Array> snapshot_values(const std::vector<const VariableState*>& vars);
/// Assigns values[i] to vars[i], all at once for calls that read them (load_variables).
void assign_values(const std::vector<VariableState*>& vars, std::vector<Array> values);

/// Locks on a set of variables in one global order (by address), so that calls and snapshots
/// over overlapping sets never deadlock.
class VariableLocks {
public:
    using Order = std::vector<std::pair<VariableState*, bool>>;
    /// One entry per variable in the global order, exclusive where any of its uses is
    /// (`exclusive[i]` for vars[i]); a Function computes it once, not per call.
    static Order order(const std::vector<VariableState*>& vars, const std::vector<bool>& exclusive);
    /// Takes the locks of `ordered` (which must outlive this object).
    explicit VariableLocks(const Order& ordered);
    ~VariableLocks();
    VariableLocks(const VariableLocks&) = delete;
    VariableLocks& operator=(const VariableLocks&) = delete;

private:
    const Order& held_;
};
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
