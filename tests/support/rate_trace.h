// A production request-rate trace as a load level per trace minute, for
// workloads and simulations that replay it time-compressed (the GenTD26
// container series in tests/data/gentd26, see tests/data/README.md).
#pragma once

#include <string>
#include <vector>

namespace egpu::test {

// Levels in [0, 1], one per minute from the first row: the requests in each
// minute (0 for a minute without a row), summed over a centred window of
// `smooth_minutes`, over the largest such sum. Rows are "timestamp,value"
// (seconds, requests per second) after a header line. Throws
// std::runtime_error naming the file and line when it cannot.
std::vector<double> load_rate_levels(const std::string& csv_path, int smooth_minutes = 5);

}  // namespace egpu::test
