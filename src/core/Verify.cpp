// The IR verifier: structural invariants of a graph (arity, attributes, types, acyclicity).
#include "Verify.h"

#include <symjax/ir/Node.h>
#include <symjax/ir/VariableState.h>

#include "../ops/OpDef.h"
#include "../ops/OpSignature.h"
#include "Hash.h"

#include <atomic>
#include <cstdlib>
#include <string>
#include <unordered_map>

namespace sj::detail {

namespace {
std::atomic<int> g_verify{-1}; // -1: not set by the program, follow the environment

[[noreturn]] void bad(const char* pass, const Node& n, const std::string& what) {
    std::string name = n.name().empty() ? "" : " '" + n.name() + "'";
    SJ_THROW(InternalError) << "IR verifier, after " << pass << ": node " << op_name(n.op()) << name
                            << " (" << n.describe(1) << ", id " << n.id() << "): " << what;
}

/// Iterative depth-first search; a node met again while it is on the stack closes a cycle.
void check_acyclic(const std::vector<NodePtr>& roots, const char* pass) {
    enum class Mark : uint8_t { Open, Done };
    std::unordered_map<const Node*, Mark> mark;
    std::vector<std::pair<const Node*, size_t>> stack;
    for (const auto& r : roots) {
        if (mark.count(r.get())) continue;
        stack.emplace_back(r.get(), 0);
        mark[r.get()] = Mark::Open;
        while (!stack.empty()) {
            auto& [n, next] = stack.back();
            if (next < n->num_inputs()) {
                const Node* c = n->input(next++).get();
                if (!c) bad(pass, *n, "input " + std::to_string(next - 1) + " is null");
                auto it = mark.find(c);
                if (it == mark.end()) {
                    mark[c] = Mark::Open;
                    stack.emplace_back(c, 0);
                } else if (it->second == Mark::Open) {
                    bad(pass, *n, "is part of a cycle through " + std::string(op_name(c->op())));
                }
                continue;
            }
            mark[n] = Mark::Done;
            stack.pop_back();
        }
    }
}

uint64_t content_hash(const Array& value) { // as src/ops/Leaves.cpp computes it
    Hasher h;
    h.add(static_cast<uint64_t>(value.dtype()));
    for (int64_t d : value.shape()) h.add(static_cast<uint64_t>(d));
    h.add_bytes(value.raw(), static_cast<size_t>(value.nbytes()));
    return h.h;
}

void check_node(const Node& n, const char* pass) {
    const OpSignature sig = op_signature(n.op());
    const int k = static_cast<int>(n.num_inputs());
    if (k < sig.min_inputs || k > sig.max_inputs)
        bad(pass, n,
            "has " + std::to_string(k) + " inputs, its op takes " + std::to_string(sig.min_inputs) +
                (sig.max_inputs == sig.min_inputs     ? ""
                 : sig.max_inputs == kUnboundedInputs ? " or more"
                                                      : " to " + std::to_string(sig.max_inputs)));
    if (n.attrs().index() != sig.attrs)
        bad(pass, n,
            "carries attribute struct #" + std::to_string(n.attrs().index()) + ", its op takes #" +
                std::to_string(sig.attrs));
    for (int64_t d : n.shape())
        if (d < -1) bad(pass, n, "has a dim < -1 in " + type_str(n.type()));
    if (n.is(Op::Variable) && !n.attr<VariableAttrs>().state)
        bad(pass, n, "variable without state");
    if (n.is(Op::Constant)) {
        const auto& c = n.attr<ConstantAttrs>();
        if (c.content_hash != content_hash(c.value))
            bad(pass, n, "constant's content hash does not match its value");
    }
    std::vector<TensorType> types;
    types.reserve(n.num_inputs());
    for (const auto& in : n.inputs()) types.push_back(in->type());
    TensorType want;
    try {
        InferCtx ctx{n.op(), n.attrs(), types, &n.inputs(), false, n.layout()};
        want = op_def(n.op()).infer(ctx);
    } catch (const Error& e) {
        bad(pass, n, std::string("its op's type rule rejects it: ") + e.what());
    }
    if (!(want == n.type()))
        bad(pass, n,
            "has type " + type_str(n.type()) + ", its op's type rule gives " + type_str(want));
}
} // namespace

void verify(const std::vector<NodePtr>& roots, const char* pass) {
    for (size_t i = 0; i < roots.size(); ++i)
        SJ_CHECK(roots[i], InternalError)
            << "IR verifier, after " << pass << ": root " << i << " is null";
    check_acyclic(roots, pass);
    std::vector<const Node*> rs;
    for (const auto& r : roots) rs.push_back(r.get());
    for (const Node* n : topo_order(rs)) check_node(*n, pass);
}

bool verify_ir_enabled() {
    int v = g_verify.load(std::memory_order_relaxed);
    if (v >= 0) return v != 0;
    static const bool from_env = [] {
        const char* d = std::getenv("SJ_DEBUG");
        const char* e = std::getenv("SJ_VERIFY");
        return (d && std::atoi(d) >= 1) || (e && std::atoi(e) >= 1);
    }();
    return from_env;
}

void set_verify_ir(bool on) {
    g_verify.store(on ? 1 : 0, std::memory_order_relaxed);
}

} // namespace sj::detail
