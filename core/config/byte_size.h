// Human byte sizes as Slurm users write them: "512M", "16G", "1.5GiB", "81559MB",
// "1073741824". Units are binary (K = 1024), as Slurm's --mem is.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "core/util/result.h"

namespace egpu::config {

Result<uint64_t> parse_byte_size(std::string_view text);

// "16.0 GiB", "512.0 MiB", "100 B": for messages and tables.
std::string format_byte_size(uint64_t bytes);

}  // namespace egpu::config
