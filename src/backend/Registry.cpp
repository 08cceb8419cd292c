// The backend registry, and what every backend shares (the NaN guard's check).
#include "Backend.h"

#include <symjax/ir/Node.h>

#include <dlfcn.h>

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

// Note [Backend plugins]
// A backend with heavy or optional dependencies is a shared library of its own,
// libsymjax_<name>.so, that libsymjax never links: the cuda backend (docs/gpu.md) lives in
// libsymjax_cuda.so, so that libsymjax loads and runs on machines without the CUDA toolkit's
// libraries, and nobody pays for LLVM's NVPTX target who does not ask for it. When a name is not
// registered, find_backend tries once per name to dlopen libsymjax_<name>.so: first from the
// directory libsymjax itself was loaded from (found with dladdr, so a build tree and an install
// prefix both work without LD_LIBRARY_PATH), then by its plain name through the loader's path.
// A plugin defines extern "C" void sj_backend_plugin_register(), which calls register_backend;
// the registry calls it and looks again. An unknown name's error lists the known backends and
// says which files were tried and why they did not load. Plugins load only on demand: the names
// backend_names() lists are the backends registered so far, which leaves out a plugin nobody
// has asked for yet (listing them would mean loading them all, LLVM and all). Names are plain
// words ([a-z0-9_]), so a backend name can never make us load a file from elsewhere. A plugin
// stays loaded until exit (its functions and the Executables it made may still be referenced).

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

namespace {
BackendFactory registered(const std::string& name) {
    std::lock_guard<std::mutex> lock(g_backends_mu);
    auto it = registry().find(name);
    return it != registry().end() ? it->second : nullptr;
}

std::string dl_error() {
    const char* e = dlerror();
    return e ? e : "unknown error";
}

/// Loads libsymjax_<name>.so and runs its registration (Note [Backend plugins]); returns "" when
/// it loaded, else what was tried and why it failed. Tried once per name: later calls return the
/// first answer.
std::string load_plugin(const std::string& name) {
    static std::mutex mu;
    static std::map<std::string, std::string> tried; // name -> the first attempt's answer
    std::lock_guard<std::mutex> lock(mu);
    if (auto it = tried.find(name); it != tried.end())
        return it->second;
    std::string& answer = tried[name];
    bool plain = !name.empty();
    for (char c : name)
        plain = plain && ((c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_');
    if (!plain)
        return answer = "no plugin tried: a backend name is made of a-z, 0-9 and _";
    const std::string file = "libsymjax_" + name + ".so";
    std::vector<std::string> paths;
    Dl_info self{};
    if (dladdr(reinterpret_cast<void*>(&find_backend), &self) && self.dli_fname) {
        std::string dir = self.dli_fname;
        const size_t slash = dir.rfind('/');
        dir = slash == std::string::npos ? "." : dir.substr(0, slash);
        paths.push_back(dir + "/" + file);
    }
    paths.push_back(file); // the loader's search path
    void* h = nullptr;
    for (const std::string& p : paths) {
        h = dlopen(p.c_str(), RTLD_NOW | RTLD_LOCAL);
        if (h)
            break;
        answer += (answer.empty() ? "tried " : "; ") + dl_error(); // (it names the file)
    }
    if (!h)
        return answer;
    using Register = void (*)();
    auto reg = reinterpret_cast<Register>(dlsym(h, "sj_backend_plugin_register"));
    if (!reg)
        return answer =
                   "loaded " + file + ", which has no sj_backend_plugin_register: " + dl_error();
    reg();
    if (!registered(name))
        return answer = "loaded " + file + ", whose sj_backend_plugin_register did not register '" +
                        name + "'";
    return answer = "";
}
} // namespace

BackendFactory find_backend(const std::string& name) {
    ensure_builtin();
    if (BackendFactory f = registered(name))
        return f;
    // (no registry lock held: the plugin's registration takes it)
    const std::string plugin = load_plugin(name);
    if (BackendFactory f = registered(name))
        return f;
    std::lock_guard<std::mutex> lock(g_backends_mu);
    std::string known;
    for (const auto& [k, v] : registry())
        known += (known.empty() ? "" : ", ") + k;
    SJ_THROW(Error) << "unknown backend '" << name << "' (known: " << known
                    << "; a backend can also come as a plugin, libsymjax_<name>.so: " << plugin
                    << ")";
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
