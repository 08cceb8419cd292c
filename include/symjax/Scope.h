// Scope: RAII name scopes ("model/dense/W") for variables and nodes.
#pragma once

#include <string>

namespace sj {

/// While a Scope lives, variables and nodes made on this thread are named under it:
///   { Scope s("model"); { Scope d("dense"); Variable W(...,"W"); } }  // "model/dense/W"
class Scope {
public:
    explicit Scope(const std::string& name);
    ~Scope();
    Scope(const Scope&) = delete;
    Scope& operator=(const Scope&) = delete;

    /// The current scope path on this thread ("" at top level).
    static const std::string& current();
    /// `name` prefixed with the current scope path.
    static std::string qualify(const std::string& name);

private:
    size_t saved_len_;
};

} // namespace sj
