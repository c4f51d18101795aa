// Slurm-style configuration text: `Key=Value` pairs, several per line allowed,
// `#` starts a comment, values may be double-quoted to hold spaces. This layer
// only tokenises; meaning and validation belong to the schema (egpu_config.h).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/util/result.h"

namespace egpu::config {

struct KeyValue {
  std::string key;
  std::string value;
  int line = 0;  // 1-based line number, for error messages
};

// Parses text; `source` names it in errors ("egpu.conf"). Errors name the line.
Result<std::vector<KeyValue>> parse_key_values(std::string_view text, std::string_view source);

}  // namespace egpu::config
