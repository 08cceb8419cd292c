// Reflection helpers over SJ_FIELDS (include/symjax/ir/Attrs.h), shared by the attribute printer
// and comparison (Attrs.cpp) and the text IR (IrText.cpp).
#pragma once

#include <string>
#include <vector>

namespace sj::detail {

/// The field names of an SJ_FIELDS list: "strides, pad_lo" -> {"strides", "pad_lo"}.
std::vector<std::string> split_field_names(const char* names);

} // namespace sj::detail
