// Helpers shared by the nn sources: unique scope names and variables created at a full name.
#pragma once

#include <symjax/Ops.h>
#include <symjax/Variable.h>

#include <atomic>
#include <optional>
#include <sstream>
#include <string>

namespace sj::nn::detail {

/// `kind` qualified by the current scope, or kind_1, kind_2, ... when a live variable already
/// lives under that path.
std::string unique_scope(const std::string &kind);

/// A variable whose full name is `full_name` when the current scope is a prefix of it (the usual
/// case: modules and optimizers create their variables in the scope they were built in); else the
/// name is nested under the current scope as every Variable's is.
Variable make_variable(const std::string &full_name, const Array &init, bool trainable);
Variable make_variable(const std::string &full_name, const Tensor &init, bool trainable);

/// SplitMix64: mixes a seed and an index into a new seed.
uint64_t mix_seed(uint64_t seed, uint64_t index);

/// The seed of a random layer's next graph-building call: mix_seed(seed, k) for its k-th call
/// when the layer has a seed (the same program built twice draws the same streams), else a
/// fresh one from the global generator.
uint64_t next_call_seed(const std::optional<uint64_t> &seed, std::atomic<uint64_t> &calls);

/// Axes as the user writes them in C++: "{1, 2}", for messages.
inline std::string axes_str(const Axes& a) {
    std::ostringstream s;
    s << "{";
    for (size_t i = 0; i < a.size(); ++i)
        s << (i ? ", " : "") << a[i];
    s << "}";
    return s.str();
}

} // namespace sj::nn::detail
