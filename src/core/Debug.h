// Debugging knobs every layer reads: SJ_DEBUG (how much to print) and SJ_DUMP (where to write
// intermediate artefacts). docs/compiler.md lists what each level shows.
#pragma once

#include <string>

namespace sj::detail {

/// The SJ_DEBUG level (0 when unset).
int debug_level();
/// Writes `text` to $SJ_DUMP/name when SJ_DUMP is set.
void dump_file(const std::string& name, const std::string& text);
/// Whether SJ_DUMP names a folder.
bool dumping();

} // namespace sj::detail
