// Text and Graphviz renderings of a graph.
#include "../core/IrText.h"

#include <symjax/Graph.h>
#include <symjax/ir/Node.h>

#include <sstream>
#include <unordered_map>

namespace sj {

namespace {
std::vector<const Node*> order_of(const std::vector<Tensor>& outputs) {
    std::vector<const Node*> roots;
    for (const auto& t : outputs) {
        SJ_CHECK(t.defined(), Error) << "graph export: undefined tensor";
        roots.push_back(t.node().get());
    }
    return topo_order(roots);
}

std::string leaf_label(const Node* n) {
    if (n->is(Op::Constant)) {
        const Array& v = n->attr<ConstantAttrs>().value;
        return v.size() <= 4 ? v.str() : "constant";
    }
    return n->name().empty() ? op_name(n->op()) : n->name();
}

std::string escape(const std::string& s) {
    std::string o;
    for (char c : s) {
        if (c == '"' || c == '\\') o += '\\';
        o += c;
    }
    return o;
}
} // namespace

std::string to_text(const std::vector<Tensor>& outputs) {
    std::vector<NodePtr> roots;
    for (const auto& t : outputs) {
        SJ_CHECK(t.defined(), Error) << "graph export: undefined tensor";
        roots.push_back(t.node());
    }
    return detail::print_ir(roots);
}

std::string to_dot(const std::vector<Tensor>& outputs) {
    auto order = order_of(outputs);
    std::unordered_map<const Node*, size_t> num;
    std::ostringstream os;
    os << "digraph symjax {\n  rankdir=TB;\n  node [fontname=\"Helvetica\", fontsize=10];\n";
    for (const Node* n : order) {
        size_t k = num.size();
        num[n] = k;
        bool leaf = has_trait(n->op(), kLeaf);
        std::string label = leaf ? leaf_label(n) : std::string(op_name(n->op()));
        if (!leaf && !n->name().empty()) label += "\\n" + n->name();
        label += "\\n" + type_str(n->type());
        const char* shape = n->is(Op::Placeholder) ? "invhouse"
                            : n->is(Op::Variable)  ? "box, style=filled, fillcolor=\"#ffe9b3\""
                            : n->is(Op::Constant)  ? "plaintext"
                                                   : "ellipse";
        os << "  n" << k << " [label=\"" << escape(label) << "\", shape=" << shape << "];\n";
        for (const auto& in : n->inputs()) os << "  n" << num.at(in.get()) << " -> n" << k << ";\n";
    }
    for (size_t i = 0; i < outputs.size(); ++i) {
        os << "  out" << i << " [label=\"output " << i << "\", shape=doublecircle];\n";
        os << "  n" << num.at(outputs[i].node().get()) << " -> out" << i << ";\n";
    }
    os << "}\n";
    return os.str();
}

} // namespace sj
