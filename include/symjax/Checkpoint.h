// Checkpoints: variables saved to and loaded from safetensors files, crash-safely and atomically.
//
//   sj::save_variables("model.safetensors");            // every live variable
//   sj::load_variables("model.safetensors", "net/*");   // only those under net/
//
// Format (https://github.com/huggingface/safetensors): an 8-byte little-endian header length N,
// N bytes of JSON {name: {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]}, ...,
// "__metadata__": {string: string}}, then the tensors' little-endian bytes, offsets relative to
// the end of the header. See docs/checkpoints.md.
#pragma once

#include <symjax/Array.h>

#include <map>
#include <string>

namespace sj {

/// Writes the variables whose full name matches `glob` (see glob_match) to `path`, keyed by their
/// full names, with `metadata` as "__metadata__". The file is written to a temporary file in the
/// same folder, flushed to disk, renamed over `path`, and the folder is flushed: a crash leaves
/// either the old or the new checkpoint, never a mix (at worst a stray "<path>.tmp.*" file).
/// Throws IOError (naming the file and the reason) and then leaves `path` untouched.
void save_variables(const std::string& path, const std::string& glob = "*",
                    const std::map<std::string, std::string>& metadata = {});

/// Loads the tensors of `path` whose names match `glob` into the live variables of the same
/// names. The tensors matching the glob and the variables matching it must be the same set, with
/// equal dtypes and shapes. All or nothing: the whole file is validated and decoded before any
/// variable is assigned, so on an IOError no variable has changed.
void load_variables(const std::string& path, const std::string& glob = "*");

/// Every tensor of a safetensors file, validated (see docs/checkpoints.md for the rules).
/// Dtypes: F32, F64, I32, I64, U8, U32, BOOL. Throws IOError naming the file, the byte offset
/// where relevant, and what is wrong.
std::map<std::string, Array> read_safetensors(const std::string& path);
/// The same, also returning the "__metadata__" entries.
std::map<std::string, Array> read_safetensors(const std::string& path,
                                              std::map<std::string, std::string>* metadata);

/// Writes `tensors` to a safetensors file, atomically as save_variables. Names must be non-empty
/// and not "__metadata__"; arrays must be defined.
void write_safetensors(const std::string& path, const std::map<std::string, Array>& tensors,
                       const std::map<std::string, std::string>& metadata = {});

} // namespace sj
