#include "Debug.h"

#include <cstdlib>
#include <filesystem>
#include <fstream>

namespace sj::detail {

int debug_level() {
    static int level = [] {
        const char* e = std::getenv("SJ_DEBUG");
        return e ? std::atoi(e) : 0;
    }();
    return level;
}

bool dumping() {
    const char* dir = std::getenv("SJ_DUMP");
    return dir && *dir;
}

void dump_file(const std::string& name, const std::string& text) {
    if (!dumping())
        return;
    std::string dir = std::getenv("SJ_DUMP");
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    std::ofstream(dir + "/" + name) << text;
}

} // namespace sj::detail
