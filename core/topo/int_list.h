// Integer lists in Slurm's ranged syntax ("0-23,48-71"), as gres.conf Cores=
// and hwloc-style CPU lists use them.
#ifndef EGPU_CORE_TOPO_INT_LIST_H
#define EGPU_CORE_TOPO_INT_LIST_H

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace egpu::topo {

// Sorts and de-duplicates, then writes runs of consecutive values as "a-b".
// {} -> "".
std::string format_ranged_list(std::vector<int> values);

// Inverse of format_ranged_list: "0-3,8" -> {0,1,2,3,8}. nullopt on syntax
// errors, negative values or reversed ranges.
std::optional<std::vector<int>> parse_ranged_list(std::string_view text);

// "-1,2,1,0": values joined by commas, no ranges (gres.conf Links=).
std::string join_comma(const std::vector<int>& values);

}  // namespace egpu::topo

#endif
