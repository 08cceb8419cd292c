// The backend registry, and what every backend shares (the NaN guard's check).
#include "Backend.h"

#include <symjax/ir/Node.h>

#include <cmath>
#include <map>
#include <mutex>

namespace sj::detail {

// Note [Backend registry]
// Backends register themselves: each one defines register_<name>_backend(), which calls
// register_backend(name, factory). The build decides which backends a library has (SJ_BACKENDS
// in CMakeLists.txt, written to Backends.def), and the registry calls their registration
// functions the first time anyone looks a backend up, so neither the runtime nor this file names
// a backend. (Static initialisers that register themselves would do the same in a shared
// library, but a static libsymjax.a drops object files nobody references, and their
// initialisers with them: a function the registry calls keeps every backend linked in.)

#define SJ_BACKEND(name) void register_##name##_backend();
#include "Backends.def"
#undef SJ_BACKEND

namespace {
std::mutex g_backends_mu;
std::map<std::string, BackendFactory>& registry() {
    static std::map<std::string, BackendFactory> m;
    return m;
}
/// Set while the built-in backends register (on the thread that runs ensure_builtin).
thread_local bool t_registering_builtins = false;
/// Registers the backends the library was built with, once: before any lookup, and before a
/// program's own registration, so that a program can replace a built-in backend by name.
void ensure_builtin() {
    static std::once_flag once;
    std::call_once(once, [] {
        t_registering_builtins = true;
#define SJ_BACKEND(name) register_##name##_backend();
#include "Backends.def"
#undef SJ_BACKEND
        t_registering_builtins = false;
    });
}
} // namespace

std::vector<std::string> backend_names() {
    ensure_builtin();
    std::lock_guard<std::mutex> lock(g_backends_mu);
    std::vector<std::string> n;
    for (const auto& [k, v] : registry())
        n.push_back(k);
    return n;
}

void register_backend(const std::string& name, BackendFactory f) {
    if (!t_registering_builtins)
        ensure_builtin();
    std::lock_guard<std::mutex> lock(g_backends_mu);
    registry()[name] = f;
}

BackendFactory find_backend(const std::string& name) {
    ensure_builtin();
    std::lock_guard<std::mutex> lock(g_backends_mu);
    auto it = registry().find(name);
    if (it != registry().end())
        return it->second;
    std::string known;
    for (const auto& [k, v] : registry())
        known += (known.empty() ? "" : ", ") + k;
    SJ_THROW(Error) << "unknown backend '" << name << "' (known: " << known << ")";
}

void check_finite(const Node& n, const Array& value) {
    if (!is_float(value.dtype()))
        return;
    int64_t bad = dispatch(value.dtype(), [&](auto tag) -> int64_t {
        using T = typename decltype(tag)::type;
        const T* p = static_cast<const T*>(value.raw());
        for (int64_t i = 0; i < value.size(); ++i)
            if (!std::isfinite(static_cast<double>(p[i])))
                return i;
        return -1;
    });
    SJ_CHECK(bad < 0, Error) << "NaN guard: " << n.describe() << " " << type_str(n.type())
                             << " produced " << value.at(bad) << " at flat index " << bad
                             << (n.scope().empty() ? "" : " (scope " + n.scope() + ")");
}

} // namespace sj::detail
