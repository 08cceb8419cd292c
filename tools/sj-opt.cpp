// sj-opt: runs compiler passes over text IR and prints the result (the driver of the FileCheck
// pass tests in tests/filecheck/; docs/ir.md).
//
//   sj-opt [--canonicalize] [--stabilize] [--specialize] [--merge-constants]
//          [--one-pass-variance] [--layout]
//          [--fuse] [--pipeline] [--stats] [--target=cpu|generic] [FILE | -]
//
// Reads the text IR (Note [Text IR] in src/core/IrText.h) from FILE or stdin, runs the passes in
// the order given (the IR verifier checks the graph after each one) and prints the graph. --fuse
// then prints the fusion plan of that graph, one group per line, naming nodes by their number in
// the printed graph; --pipeline runs the whole compiler (src/compiler/Pipeline.cpp) and prints
// its graph and plan. --stats adds the rewrite patterns' hit counts as comment lines. --target
// names the target fusion and the pipeline ask (src/compiler/Target.h): cpu (the default) or
// generic (no library calls, no lowering).
#include "backend/cpu/CpuTarget.h"
#include "backend/cpu/LayoutPass.h"
#include "compiler/Canonicalize.h"
#include "compiler/Fusion.h"
#include "compiler/MergeConstants.h"
#include "compiler/Pipeline.h"
#include "compiler/Specialize.h"
#include "compiler/Stabilize.h"
#include "core/IrText.h"
#include "core/Verify.h"

#include <symjax/ir/Node.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>
#include <unordered_map>
#include <vector>

using namespace sj;
namespace cc = sj::compiler;

namespace {

using PassFn = std::vector<NodePtr> (*)(const std::vector<NodePtr>&, cc::RewriteStats*);

struct Pass {
    const char* flag;
    const char* name;
    PassFn run;
};

const Pass kPasses[] = {
    {"--canonicalize", "canonicalize", cc::canonicalize},
    {"--stabilize", "stabilize", cc::stabilize},
    {"--specialize", "specialize", cc::specialize},
    {"--merge-constants", "merge_constants", cc::merge_constants},
    {"--one-pass-variance", "one_pass_variance", cc::one_pass_variances}, // the cpu target's
    {"--layout", "layout", cpu::layout},                                  // lowering
};

/// The plan as comment lines (the output stays text IR), one per group: "# group 0 kernel: %4 %6
/// [5 insts, 2 loads, space [4, 8], reduce []]", "# group 1 window: %3 post-ops: add[channel]
/// relu -> %7", then the fusion decisions. Nodes are named by their number in the printed graph
/// (`num`); a node that is not in it by its description.
std::string plan_text(const cc::FusionPlan& plan,
                      const std::unordered_map<const Node*, size_t>& num) {
    auto ref = [&](const NodePtr& n) {
        auto it = num.find(n.get());
        return it == num.end() ? n->describe(1) : "%" + std::to_string(it->second);
    };
    std::ostringstream os;
    for (size_t i = 0; i < plan.groups.size(); ++i) {
        const cc::Group& g = plan.groups[i];
        os << "# group " << i << " " << cc::kind_name(g.kind) << ":";
        for (const auto& r : g.roots) os << " " << ref(r);
        if (!g.epilogue.empty()) {
            os << " post-ops:";
            for (const auto& p : g.epilogue) os << " " << p.str();
            os << " -> " << ref(g.result(0));
        }
        if (g.kind == cc::Group::Kind::Kernel)
            os << " [" << g.insts.size() << " insts, " << g.loads.size() << " loads, space "
               << shape_str(g.space->shape()) << ", reduce " << shape_str(g.reduce_axes) << "]";
        os << "\n";
    }
    for (const auto& d : plan.decisions) os << "#   " << d << "\n";
    return os.str();
}

int usage(const char* why) {
    std::fprintf(
        stderr,
        "sj-opt: %s\nusage: sj-opt [--canonicalize] [--stabilize] [--specialize] "
        "[--merge-constants] [--one-pass-variance] [--layout] [--fuse] [--pipeline] [--stats] "
        "[--target=cpu|generic] [FILE | -]\n",
        why);
    return 2;
}

} // namespace

int main(int argc, char** argv) {
    std::vector<const Pass*> passes;
    bool fuse = false, pipeline = false, stats = false;
    const cc::Target* target = &cpu::cpu_target();
    std::string path = "-";
    bool have_path = false;
    for (int i = 1; i < argc; ++i) {
        std::string a = argv[i];
        if (a == "--help" || a == "-h") return usage("runs compiler passes over text IR"), 0;
        if (a == "--fuse") {
            fuse = true;
            continue;
        }
        if (a == "--pipeline") {
            pipeline = true;
            continue;
        }
        if (a == "--stats") {
            stats = true;
            continue;
        }
        if (a == "--target=cpu" || a == "--target=generic") {
            target = a == "--target=cpu" ? &cpu::cpu_target() : &cc::generic_target();
            continue;
        }
        const Pass* p = nullptr;
        for (const Pass& k : kPasses)
            if (a == k.flag || a == std::string("--") + k.name) p = &k;
        if (p) {
            passes.push_back(p);
            continue;
        }
        if (a.size() > 1 && a[0] == '-') return usage(("unknown option " + a).c_str());
        if (have_path) return usage("more than one input file");
        path = a;
        have_path = true;
    }

    std::string text;
    if (path == "-") {
        text.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
    } else {
        std::ifstream f(path, std::ios::binary);
        if (!f) {
            std::fprintf(stderr, "sj-opt: cannot read %s\n", path.c_str());
            return 1;
        }
        text.assign(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
    }

    try {
        detail::ParseOptions po;
        po.source = path == "-" ? "<stdin>" : path;
        std::vector<NodePtr> roots = detail::parse_ir(text, po);
        detail::verify(roots, "parse");
        cc::RewriteStats rs;
        for (const Pass* p : passes) {
            roots = p->run(roots, &rs);
            detail::verify(roots, p->name);
        }
        cc::FusionPlan plan;
        if (pipeline) {
            detail::set_verify_ir(true);
            cc::Compiled c = cc::compile(roots, *target);
            roots = c.roots;
            plan = std::move(c.plan);
            rs.merge(c.rewrites);
        } else if (fuse) {
            plan = cc::fuse(roots, *target);
        }
        std::unordered_map<const Node*, size_t> num;
        std::string out = detail::print_ir(roots, &num);
        if (fuse || pipeline) out += plan_text(plan, num);
        if (stats)
            for (const auto& [name, hits] : rs.hits)
                out += "# " + name + ": " + std::to_string(hits) + "\n";
        std::fwrite(out.data(), 1, out.size(), stdout);
    } catch (const Error& e) {
        std::fprintf(stderr, "sj-opt: %s\n", e.what());
        return 1;
    }
    return 0;
}
