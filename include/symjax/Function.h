// Compiled functions: inputs, outputs and in-place variable updates (Theano semantics).
#pragma once

#include <symjax/Variable.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <type_traits>
#include <unordered_map>
#include <vector>

namespace sj {

/// Variable -> new value pairs, applied together after a call. `a + b` merges two sets (a
/// variable updated in both is an error).
class Updates {
public:
    Updates() = default;
    Updates(std::initializer_list<std::pair<Variable, Tensor>> items);
    /// Adds var <- value (value must have the variable's dtype and shape).
    Updates& add(const Variable& var, const Tensor& value);
    Updates& operator+=(const Updates& o);
    friend Updates operator+(Updates a, const Updates& b) { return a += b; }

    size_t size() const { return items_.size(); }
    bool empty() const { return items_.empty(); }
    const std::vector<std::pair<Variable, Tensor>>& items() const { return items_; }
    /// The new value for var, or an undefined Tensor.
    Tensor get(const Variable& var) const;

private:
    std::vector<std::pair<Variable, Tensor>> items_;
    std::unordered_map<const Node*, size_t> index_; // variable's node -> its item
};

/// Options of function().
struct FunctionOptions {
    /// "cpu" (the compiler: fusion and JIT-compiled kernels), "reference" (the interpreter,
    /// the oracle tests compare against) or "cuda" (GPUs, a plugin loaded on demand:
    /// docs/gpu.md). SJ_BACKEND in the environment overrides the default.
    std::string backend = default_backend();
    /// When true, random ops draw the same numbers on every call (the counter stays at its seed).
    bool freeze_rng = false;
    /// Starting value of the call counter random ops use.
    uint64_t rng_counter = 0;
    /// Checks every computed value for NaN/Inf and throws naming the first node producing one.
    /// SJ_NAN_GUARD=1 in the environment turns it on by default (like JAX_DEBUG_NANS).
    bool nan_guard = default_nan_guard();
    /// Times every kernel; Function::profile_report() prints the table.
    bool profile = false;
    /// Lets variable updates write into the variable's own buffer when provably safe.
    bool inplace_updates = true;
    /// cpu backend, more than one process: posts each all_reduce when its input is computed and
    /// waits for it where its result is first needed, so that communication overlaps the rest
    /// of the step (docs/distributed.md, "Overlap"); false waits at each all_reduce.
    bool overlap_collectives = true;
    /// Treats floats below the normal range (|x| < 1.2e-38 in f32) as zero while the function
    /// runs, on every thread that runs it: they then cost what other values cost instead of a
    /// CPU assist each (up to 3x slower layers in training: docs/performance.md, "Denormals").
    /// Each thread gets its own arithmetic back when the call returns. False keeps IEEE
    /// arithmetic, what the reference interpreter computes. SJ_FLUSH_DENORMALS=1 in the
    /// environment turns it on by default. CPU only: GPU kernels are not affected.
    bool flush_denormals = default_flush_denormals();

    static std::string default_backend();
    static bool default_nan_guard();
    static bool default_flush_denormals();
};

/// Statistics of the compiled program (filled by the backend).
struct FunctionStats {
    size_t nodes = 0;          // primitive nodes executed per call
    size_t kernels = 0;        // generated kernels (0 for the reference backend)
    size_t library_calls = 0;  // vendor library calls
    size_t post_ops = 0;       // elementwise ops applied inside library calls (oneDNN post-ops)
    int64_t intermediate_bytes = 0;
    int64_t peak_arena_bytes = 0;
    /// Bytes of the buffers the last call's computed values occupy (cpu backend): values of one
    /// type whose lifetimes do not overlap share a buffer, so this lies between
    /// peak_arena_bytes and intermediate_bytes plus the outputs (docs/performance.md, "Buffers
    /// shared by lifetime").
    int64_t buffer_bytes = 0;
    /// Steps of one call that start the thread team (generated kernels big enough to split,
    /// library calls but small matmuls and small pools), for the shapes of the last call; 0 on
    /// one thread.
    size_t parallel_regions = 0;
    /// Scans of the last call that ran as a compiled loop, and as one step kernel (cpu backend:
    /// docs/control-flow.md, "Compiled loops"); the other scans called their body step by step.
    size_t compiled_loops = 0;
    size_t step_kernels = 0;
    /// Milliseconds the last call spent waiting for collectives (cpu backend): the
    /// communication the rest of the step did not hide.
    double collective_wait_ms = 0;
    /// Weights the last call's matmuls read from a packed copy that the function keeps between
    /// calls and its update writes (cpu backend: docs/performance.md, "Packed weights").
    size_t packed_weights = 0;
};

namespace detail {
class FunctionImpl;
}

/// A compiled function. Call it with Arrays (or C++ numbers for 0-d inputs):
///   std::vector<Array> out = f(x_batch, y_batch);
/// Outputs and update values are all computed from the variables' values before the call; then
/// every updated variable takes its new value at once. A call that throws changes no variable.
class Function {
public:
    Function() = default;
    /// One argument: an Array, or a C++ number for a 0-d input, converted to its dtype only when
    /// the value is exact there: for an integer input a NaN, an infinity, a fraction or a value
    /// out of the dtype's range is an InputError naming the input; a bool input takes 0 or 1.
    struct Arg {
        Arg(const Array& a) : array(a) {} // NOLINT: implicit by design
        template <class T, class = std::enable_if_t<std::is_arithmetic_v<T>>>
        Arg(T v) : number(static_cast<double>(v)), is_number(true) { // NOLINT
            // integers keep their exact value (a double holds only 53 bits)
            if constexpr (std::is_integral_v<T>) {
                if (!std::is_signed_v<T> && static_cast<uint64_t>(v) > uint64_t(INT64_MAX))
                    return;
                integer = static_cast<int64_t>(v);
                is_integer = true;
            }
        }
        Array array;
        double number = 0;
        int64_t integer = 0;
        bool is_number = false;
        bool is_integer = false; // `integer` holds the exact value
    };
    std::vector<Array> call(const std::vector<Arg>& inputs) const;
    template <class... A> std::vector<Array> operator()(const A&... args) const {
        return call(std::vector<Arg>{Arg(args)...});
    }
    size_t num_inputs() const;
    size_t num_outputs() const;
    const FunctionStats& stats() const;
    /// Number of times the function has been called.
    uint64_t calls() const;
    /// Per-kernel time, GB/s and GFLOP/s accumulated over calls (needs options.profile).
    std::string profile_report() const;
    /// The compiled program as text (fusion groups and kernels), for debugging.
    std::string dump() const;

private:
    friend Function function(const std::vector<Tensor>&, const std::vector<Tensor>&, const Updates&,
                             const FunctionOptions&);
    std::shared_ptr<detail::FunctionImpl> impl_;
};

/// Names of the registered backends ("cpu", "reference", ...). A backend that comes as a plugin
/// ("cuda": libsymjax_cuda.so, docs/gpu.md) is loaded on demand, when a function first asks for
/// it, and is listed only from then on: this call stays cheap and loads nothing.
std::vector<std::string> available_backends();

/// Compiles a function of `inputs` returning `outputs` and applying `updates`. An input may be
/// any tensor: a placeholder, a variable, an intermediate or a constant. A tensor that is not a
/// placeholder is overridden by its argument on each call (Theano's givens at call time): the
/// program treats it as an input, so nothing upstream of it runs unless another output needs it,
/// and its argument is checked against its type (-1 dims bind per call) like a placeholder's.
/// A variable given as an input keeps its stored value; an update of it still writes the
/// variable, with the new value computed from the argument (docs/functions.md).
Function function(const std::vector<Tensor>& inputs, const std::vector<Tensor>& outputs,
                  const Updates& updates = {}, const FunctionOptions& options = {});

} // namespace sj
