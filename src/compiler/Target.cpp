#include "Target.h"

#include <symjax/ir/Node.h>

namespace sj::compiler {
namespace {

class GenericTarget final : public Target {
public:
    std::string name() const override { return "generic"; }
    LibraryCall library_call(const Node&) const override { return LibraryCall::None; }
    EpilogueRule epilogue(const Node&) const override { return {}; }
    std::vector<NodePtr> lower(const std::vector<NodePtr>& roots, RewriteStats*) const override {
        return roots;
    }
    // a plain 512-bit vector unit; only the trip counts of short inner loops depend on it
    int vector_lanes() const override { return 16; }
};

} // namespace

const Target& generic_target() {
    static const GenericTarget t;
    return t;
}

} // namespace sj::compiler
