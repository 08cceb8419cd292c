// Thread counts: the cpu backend's limit, and the check of a count that a user gives.
#pragma once

#include <string>

namespace sj {

/// The most threads the cpu backend runs at once: 4 per hardware thread
/// (std::thread::hardware_concurrency(), at least 1). More only adds contention, and a count
/// like 100000 made OpenMP fail to start its team (a crash, not an error).
int max_threads();

/// A thread count given as text by a user; `where` names its source in messages ("--threads",
/// "SJ_NUM_THREADS"). InputError unless the text is a whole number >= 1; a count above
/// max_threads() is lowered to it, with a warning on stderr.
int parse_thread_count(const std::string& text, const std::string& where);

} // namespace sj
