// Text that came from a process of another user (egpuctl's relay runs as a
// job's owner), made safe to print on an admin's terminal: its control
// characters become '?', so no escape sequence in it can move the cursor,
// rewrite what was printed, retitle the window or make the terminal answer.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace egpu {

// C0 controls but newline and tab, DEL, and C1 controls as UTF-8 encodes
// them (a terminal may take U+009B for an escape sequence's start) become
// '?'; everything else is kept byte for byte.
std::string printable(std::string_view text);

// The same for every string in `value` (keys too), in place.
void make_printable(nlohmann::json& value);

}  // namespace egpu
