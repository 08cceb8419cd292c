// Scope: name scopes ("model/dense/W") for variables and nodes, kept and re-entered as values.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace sj {

class Tensor;
class Variable;
class Placeholder;

/// A name scope. Constructing one defines `name` under the current scope of this thread and
/// enters it until the object is destroyed (RAII): variables, placeholders and nodes made
/// meanwhile are named under it:
///   { Scope s("model"); { Scope d("dense"); Variable W(..., "W"); } }  // "model/dense/W"
/// A Scope is also a value naming that scope: it can be kept, copied (copies name the same scope
/// and do not hold the entry) and entered again with enter(), which returns a guard; entering
/// again adds to the same scope (there is no "model_1"), wherever the thread is at the time:
///   Scope dense = Scope::make("dense");          // defined, not entered
///   { auto in = dense.enter(); Variable b(..., "b"); }
///   dense.variables();  dense.ops();  dense.absolute_name();   // "/dense/"
/// Two scopes of the same path are the same scope. Scopes are per thread.
class Scope {
public:
    /// The guard of one entry: leaves the scope (restoring the thread's previous scope) when
    /// destroyed or at leave(). Guards must end in the reverse order of their entries.
    class Entry {
    public:
        Entry(Entry&& o) noexcept;
        Entry& operator=(Entry&&) = delete;
        Entry(const Entry&) = delete;
        Entry& operator=(const Entry&) = delete;
        ~Entry();
        /// Leaves now (a second call does nothing).
        void leave();

    private:
        friend class Scope;
        explicit Entry(const std::string& path);
        std::string saved_;
        bool active_ = false;
    };

    /// Defines `name` (non-empty, no '/') under the current scope and enters it until this
    /// object is destroyed or leave() is called.
    explicit Scope(const std::string& name);
    /// Defines `name` under the current scope without entering it.
    static Scope make(const std::string& name);
    /// The scope at an absolute path: "/model/dense/", "model/dense"; "/" or "" is the root.
    static Scope at(const std::string& path);
    /// The scope this thread is in now (the root at top level).
    static Scope here();

    ~Scope();
    /// The same scope, not entered.
    Scope(const Scope& o);
    /// Names o's scope; an entry this object held (from its constructor) is left first.
    Scope& operator=(const Scope& o);
    Scope(Scope&& o) noexcept;
    Scope& operator=(Scope&& o) noexcept;

    /// Enters this scope (from wherever the thread is) until the guard ends.
    [[nodiscard]] Entry enter() const;
    /// Leaves the entry made by the constructor early (nothing when there is none).
    void leave();

    /// The path without slashes at the ends ("model/dense"; "" for the root).
    const std::string& path() const { return path_; }
    /// The last component ("dense"; "" for the root).
    std::string name() const;
    /// The path as SymJAX prints it: "/model/dense/" ("/" for the root).
    std::string absolute_name() const;
    /// Live variables named under this scope or a scope nested in it, in creation order; with
    /// trainable set, only those whose flag equals it.
    std::vector<Variable> variables(std::optional<bool> trainable = {}) const;
    /// Live op nodes (not leaves) first made under this scope or one nested in it, in creation
    /// order. Nodes are held by the graph, never by the scope.
    std::vector<Tensor> ops() const;
    /// Live placeholders made under this scope or one nested in it, in creation order.
    std::vector<Placeholder> placeholders() const;

    /// The current scope path on this thread ("" at top level).
    static const std::string& current();
    /// `name` prefixed with the current scope path.
    static std::string qualify(const std::string& name);
    /// True when `scope_path` is `path` or a scope nested in it ("" contains every scope).
    static bool contains(const std::string& path, const std::string& scope_path);

private:
    explicit Scope(std::string path, int /*not entered*/);
    std::string path_;
    std::optional<Entry> entry_;
};

} // namespace sj
