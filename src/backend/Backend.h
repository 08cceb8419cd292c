// The interface between Function and the backends that execute a program, and the registry
// through which backends offer themselves (Note [Backend registry] in Registry.cpp).
#pragma once

#include "../core/Program.h"

#include <symjax/Function.h>
#include <symjax/ir/ControlFlow.h>
#include <symjax/ir/Node.h>

#include <memory>
#include <string>
#include <vector>

namespace sj::detail {

struct ExecResult {
    std::vector<Array> outputs;
    std::vector<Array> new_values; // one per update, in Program::updates order
};

/// A compiled program. run() must not modify any variable: it returns the new values, and
/// Function commits them after run() returns (so a throwing run changes nothing).
class Executable {
public:
    virtual ~Executable() = default;
    virtual ExecResult run(const std::vector<Array>& inputs, const std::vector<Array>& var_values,
                           uint64_t counter) = 0;
    /// Function calls it after committing a run's new values, still holding the call's
    /// variable locks: an executable that keeps something derived from a variable's value
    /// across calls learns here the stamp (VariableState::version) of the value it computed
    /// (Note [Packed weights] in src/backend/cpu/CpuExecutable.cpp). Not called after a run
    /// that threw, nor for eval's runs.
    virtual void committed() {}
    virtual FunctionStats stats() const = 0;
    virtual std::string profile_report() const { return ""; }
    virtual std::string dump() const { return ""; }
};

/// FunctionOptions::nan_guard: throws Error naming `n` (its description, type, the flat index
/// and scope) when the float `value` it computed holds a NaN or an infinity. Every backend calls
/// it, when the option is set, on each value it computes (a node, or each root of a fused group),
/// in execution order, so the error names the first node that produced one.
void check_finite(const Node& n, const Array& value);

/// A region's body as a program of its own (inputs: its parameters; outputs: its results), which a
/// backend compiles like any other (Note [Structured ops] in src/ops/ControlFlow.cpp).
inline Program body_program(const Body& b) {
    Program p;
    p.inputs = b.params;
    p.outputs = b.results;
    return p;
}

using BackendFactory = std::unique_ptr<Executable> (*)(const Program&, const FunctionOptions&);
/// Registers a backend under a name ("reference", "cpu", ...); a later registration of the same
/// name replaces the earlier one. Each backend calls it from its register_<name>_backend().
void register_backend(const std::string& name, BackendFactory f);
/// The named backend; when it is not registered, loads its plugin libsymjax_<name>.so if there
/// is one (Note [Backend plugins] in Registry.cpp); throws Error listing the known names and the
/// plugin files tried when absent.
BackendFactory find_backend(const std::string& name);
/// The registered backends' names, sorted: the built-in ones and the plugins loaded so far
/// (listing loads no plugin).
std::vector<std::string> backend_names();

} // namespace sj::detail
