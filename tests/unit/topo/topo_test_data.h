// Where core/topo's tests find their data (set by CMake).
#ifndef EGPU_TESTS_UNIT_TOPO_TOPO_TEST_DATA_H
#define EGPU_TESTS_UNIT_TOPO_TOPO_TEST_DATA_H

#include <string>
#include <string_view>
#include <vector>

namespace egpu::topo::test {

inline std::string topology_xml(std::string_view name) {
  return std::string(EGPU_TOPO_TEST_DATA_DIR) + "/" + std::string(name);
}

inline std::string fake_nvml_library() {
  return EGPU_FAKE_NVML_LIBRARY;
}

// Every GPU pair connected by `links` lanes, -1 on the diagonal.
inline std::vector<std::vector<int>> all_to_all(size_t n, int links) {
  std::vector<std::vector<int>> matrix(n, std::vector<int>(n, links));
  for (size_t i = 0; i < n; ++i)
    matrix[i][i] = -1;
  return matrix;
}

// DGX-1V hybrid cube mesh (nvidia-smi topo -m: NV1/NV2), in PCI bus order.
inline const std::vector<std::vector<int>> kV100CubeMesh8 = {
    {-1, 1, 1, 2, 2, 0, 0, 0}, {1, -1, 2, 1, 0, 2, 0, 0}, {1, 2, -1, 2, 0, 0, 1, 0},
    {2, 1, 2, -1, 0, 0, 0, 1}, {2, 0, 0, 0, -1, 1, 1, 2}, {0, 2, 0, 0, 1, -1, 2, 1},
    {0, 0, 1, 0, 1, 2, -1, 2}, {0, 0, 0, 1, 2, 1, 2, -1}};

}  // namespace egpu::topo::test

#endif
