// The IR verifier: the structural invariants of a graph, checked after every compiler pass.
#pragma once

#include <symjax/ir/Node.h>

#include <vector>

namespace sj::detail {

/// Checks the graph under `roots`: every input is defined, leaves have none and other ops the
/// count their signature allows (src/ops/OpSignature.h), each node carries its op's attribute
/// struct, dims are known or -1, constants hold a value of their type whose content hash is
/// right, variables have state, each node's type is what its op's type rule infers from its
/// inputs, and no node reaches itself. Throws InternalError naming `pass` (what made the graph)
/// and the first bad node.
void verify(const std::vector<NodePtr>& roots, const char* pass);

/// Whether the compiler verifies the graph after each pass: when SJ_DEBUG >= 1 or SJ_VERIFY=1,
/// or after set_verify_ir(true) (the test suite turns it on for every test).
bool verify_ir_enabled();
void set_verify_ir(bool on);

} // namespace sj::detail
