// Shared by the libFuzzer targets: the readers take paths, so each input is written to a file in
// memory-backed /dev/shm first. A reader may reject an input only with sj::Error (the library's
// promise: a clear error, never a crash); anything else that escapes is a finding.
#pragma once

#include <symjax/Error.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <string>
#include <unistd.h>

namespace sj::fuzz {

/// A per-process file holding the current input, named with `suffix` (some readers look at the
/// extension).
inline std::string write_input(const uint8_t* data, size_t size, const std::string& suffix = "") {
    static const std::string dir = [] {
        std::string d = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
        return d + "/sj-fuzz-" + std::to_string(getpid());
    }();
    std::string path = dir + suffix;
    FILE* f = std::fopen(path.c_str(), "wb");
    if (!f) std::abort();
    if (size && std::fwrite(data, 1, size, f) != size) std::abort();
    std::fclose(f);
    return path;
}

/// Runs `read` on the input: sj::Error is an accepted rejection, any other exception aborts.
template <class F> int run(F&& read) {
    try {
        read();
    } catch (const sj::Error&) {
    } catch (const std::exception& e) {
        std::fprintf(stderr, "not an sj::Error: %s\n", e.what());
        std::abort();
    }
    return 0;
}

} // namespace sj::fuzz
