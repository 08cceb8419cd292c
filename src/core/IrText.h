// The text form of the graph IR: a printer and a parser that reads the printed text back.
#pragma once

#include <symjax/ir/Node.h>

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace sj::detail {

// Note [Text IR]
// One node per line, each after its inputs, then the roots (docs/ir.md has the grammar):
//
//   %0 = placeholder "x" : f32[-1, 10]
//   %1 = variable "dense/W" : f32[10, 3]
//   %2 = constant 0.5 : f32[]
//   %3 = dot_general(%0, %1) {lhs_contract=[1], rhs_contract=[0]} : f32[-1, 3]
//   %4 = mul(%3, %2) : f32[-1, 3] named "logits"
//   return %4
//
// Attributes are the fields of the op's attribute struct (SJ_FIELDS), those equal to the
// struct's default left out; constants carry every value exactly (floats in the shortest form
// that reads back to the same bits, NaNs with their payload), so print -> parse -> print gives
// the same text. What the text does not carry, and what parsing does instead:
// - identity: each placeholder and constant line makes a leaf of its own (a fresh id, Note
//   [Constant identity]), as the user's placeholder(...) and constant(...) do;
// - a variable's value: a variable line is the live variable of that full name when there is
//   one (its dtype, shape and trainable flag must match), else a new variable of that name
//   holding zeros;
// - scopes (Node::scope) and the ids of the leaves.
// The parser checks every line's type against the op's type rule and rejects anything else
// with a ParseError naming the line and column and what was expected; it never crashes on
// arbitrary bytes (fuzz/fuzz_ir_text.cpp).

/// The text of the graph under `roots` (Note [Text IR]). When `numbering` is given it receives
/// each printed node's number (%k).
std::string print_ir(const std::vector<NodePtr>& roots,
                     std::unordered_map<const Node*, size_t>* numbering = nullptr);

struct ParseOptions {
    /// Largest value the parser materialises (a splat constant, a new variable's zeros), in
    /// elements: hostile text cannot make it allocate more.
    int64_t max_elements = int64_t(1) << 26;
    /// Names the text in messages ("file.sjir:3:7: ..."); "line 3:7: ..." when empty.
    std::string source;
};

/// Builds the graph the text describes and returns its roots (the `return` line), in order.
/// Throws ParseError on malformed text or a line whose op rejects its inputs or attributes.
std::vector<NodePtr> parse_ir(std::string_view text, const ParseOptions& options = {});

} // namespace sj::detail
