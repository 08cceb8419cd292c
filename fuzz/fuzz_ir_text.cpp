// libFuzzer target: the text IR parser (src/core/IrText.h) on arbitrary bytes. Whatever parses
// must also print and parse back to the same text.
#include "FuzzUtil.h"

#include <symjax/ir/Node.h>

#include "core/IrText.h"

#include <string>
#include <string_view>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
    sj::detail::ParseOptions o;
    o.max_elements = 1 << 16; // the limit keeps splat constants and variables small
    return sj::fuzz::run([&] {
        std::string_view text(reinterpret_cast<const char*>(data), size);
        std::vector<sj::NodePtr> roots = sj::detail::parse_ir(text, o);
        std::string printed = sj::detail::print_ir(roots);
        std::vector<sj::NodePtr> again = sj::detail::parse_ir(printed, o);
        if (sj::detail::print_ir(again) != printed) {
            std::fprintf(stderr, "round trip differs:\n%s", printed.c_str());
            std::abort();
        }
    });
}
