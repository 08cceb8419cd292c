// Scope: thread-local name scopes, entered by RAII guards.
#include <symjax/Error.h>
#include <symjax/Scope.h>

namespace sj {

namespace {
thread_local std::string g_scope;

void check_component(const std::string& name) {
    SJ_CHECK(!name.empty() && name.find('/') == std::string::npos, Error)
        << "Scope: name '" << name << "' must be non-empty and contain no '/'";
}

std::string child_path(const std::string& name) {
    check_component(name);
    return g_scope.empty() ? name : g_scope + "/" + name;
}
} // namespace

// ---- Entry --------------------------------------------------------------------------------------
Scope::Entry::Entry(const std::string& path) : saved_(g_scope), active_(true) {
    g_scope = path;
}

Scope::Entry::Entry(Entry&& o) noexcept : saved_(std::move(o.saved_)), active_(o.active_) {
    o.active_ = false;
}

Scope::Entry::~Entry() {
    leave();
}

void Scope::Entry::leave() {
    if (!active_)
        return;
    active_ = false;
    g_scope = std::move(saved_);
}

// ---- Scope --------------------------------------------------------------------------------------
Scope::Scope(const std::string& name) : path_(child_path(name)) {
    entry_.emplace(Entry(path_));
}

Scope::Scope(std::string path, int) : path_(std::move(path)) {}

Scope Scope::make(const std::string& name) {
    return Scope(child_path(name), 0);
}

Scope Scope::at(const std::string& path) {
    size_t b = 0, e = path.size();
    while (b < e && path[b] == '/')
        ++b;
    while (e > b && path[e - 1] == '/')
        --e;
    std::string p = path.substr(b, e - b);
    size_t start = 0;
    while (!p.empty()) { // every component non-empty: no "a//b"
        size_t slash = p.find('/', start);
        SJ_CHECK(slash != start, Error)
            << "Scope::at: path '" << path << "' has an empty component";
        if (slash == std::string::npos)
            break;
        start = slash + 1;
    }
    return Scope(std::move(p), 0);
}

Scope Scope::here() {
    return Scope(g_scope, 0);
}

Scope::~Scope() = default;

Scope::Scope(const Scope& o) : path_(o.path_) {}

Scope& Scope::operator=(const Scope& o) {
    if (this == &o)
        return *this;
    leave();
    path_ = o.path_;
    return *this;
}

Scope::Scope(Scope&& o) noexcept : path_(std::move(o.path_)), entry_(std::move(o.entry_)) {
    o.entry_.reset();
}

Scope& Scope::operator=(Scope&& o) noexcept {
    if (this == &o)
        return *this;
    leave();
    path_ = std::move(o.path_);
    if (o.entry_)
        entry_.emplace(std::move(*o.entry_));
    o.entry_.reset();
    return *this;
}

Scope::Entry Scope::enter() const {
    return Entry(path_);
}

void Scope::leave() {
    entry_.reset();
}

std::string Scope::name() const {
    size_t slash = path_.rfind('/');
    return slash == std::string::npos ? path_ : path_.substr(slash + 1);
}

std::string Scope::absolute_name() const {
    return path_.empty() ? "/" : "/" + path_ + "/";
}

const std::string& Scope::current() {
    return g_scope;
}

std::string Scope::qualify(const std::string& name) {
    return g_scope.empty() ? name : g_scope + "/" + name;
}

bool Scope::contains(const std::string& path, const std::string& scope_path) {
    if (path.empty())
        return true;
    if (scope_path.size() < path.size() || scope_path.compare(0, path.size(), path) != 0)
        return false;
    return scope_path.size() == path.size() || scope_path[path.size()] == '/';
}

} // namespace sj
