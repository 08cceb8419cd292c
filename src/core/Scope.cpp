// Scope: thread-local name scopes.
#include <symjax/Error.h>
#include <symjax/Scope.h>

namespace sj {

namespace {
thread_local std::string g_scope;
}

Scope::Scope(const std::string& name) : saved_len_(g_scope.size()) {
    SJ_CHECK(!name.empty() && name.find('/') == std::string::npos, Error)
        << "Scope: name '" << name << "' must be non-empty and contain no '/'";
    if (!g_scope.empty()) g_scope += '/';
    g_scope += name;
}

Scope::~Scope() { g_scope.resize(saved_len_); }

const std::string& Scope::current() { return g_scope; }

std::string Scope::qualify(const std::string& name) {
    return g_scope.empty() ? name : g_scope + "/" + name;
}

} // namespace sj
