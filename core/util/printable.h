// Text that came from a process of another user (egpuctl's relay runs as a
// job's owner), made safe to print on an admin's terminal: its control
// characters become '?', so no escape sequence in it can move the cursor,
// rewrite what was printed, retitle the window or make the terminal answer.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace egpu {

// Whether newlines (and tabs) in the text stay: a relayed stderr is lines,
// a field (a step, a node, an objective) is one value, whose newline would
// print a row of the user's making under the admin's.
enum class Lines { kKept, kOne };

// C0 controls (but newline and tab where lines are kept), DEL, C1 controls
// as UTF-8 encodes them (a terminal may take U+009B for an escape
// sequence's start), and every byte that is not part of valid UTF-8 (a lone
// 0x9b is CSI to an 8-bit terminal; nlohmann's dump() throws on it) become
// '?'; everything else is kept byte for byte.
std::string printable(std::string_view text, Lines lines = Lines::kKept);

// Every string in `value` (keys too), in place, each as one line.
void make_printable(nlohmann::json& value);

}  // namespace egpu
