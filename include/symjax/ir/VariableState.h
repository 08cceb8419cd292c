// The storage behind a Variable and the locks that give readers one step's values. Internal:
// include it deliberately (runners, checkpoints, tools), not from user code.
#pragma once

#include <symjax/Variable.h>

#include <cstdint>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <utility>
#include <vector>

namespace sj {

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
    /// The stamp of `value` (Note [Variable versions] in Variable.cpp): a fresh one from a
    /// global counter at every write, never 0; guarded by `mu`.
    uint64_t version = 0;
    /// value = v under a fresh stamp; the caller holds `mu` (or is constructing the state).
    void set_value(Array v);
    /// The stamp of the current value, read under `mu`.
    uint64_t current_version();
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

} // namespace sj
