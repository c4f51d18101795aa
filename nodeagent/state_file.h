// The agent's own state files in its root-only runtime directory (the
// latency control's memory, the multi-node gangs' offsets): what a restarted
// agent reads back. Never handed to a job. Written whole to a new file and
// renamed over the old one, so a crash mid-write leaves the previous state;
// read back only from a regular file of the agent's user that nobody else
// may read or write.
#pragma once

#include <cstddef>
#include <optional>
#include <string>

#include "core/util/result.h"

namespace egpu::agent {

// The file's text; nullopt when there is none. An error names the file and
// what is wrong. A file this agent could not have written (a link, another
// owner or mode, over `max_bytes`) is set aside (to FILE.bad, kept for a
// look, never read again) so the next start does not warn of it again; one
// it could not read now (out of descriptors, an I/O error) stays.
Result<std::optional<std::string>> read_state_file(const std::string& file, std::size_t max_bytes);
Status write_state_file(const std::string& file, const std::string& text);
// There is no state to keep: OK when the file is gone (or was never there).
// An error leaves a file a restarted agent would read back.
Status remove_state_file(const std::string& file);
// For a file whose text the caller could not use.
void set_aside_state_file(const std::string& file);

}  // namespace egpu::agent
