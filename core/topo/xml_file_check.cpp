#include "core/topo/xml_file_check.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <string_view>

namespace egpu::topo {
namespace {

struct FileCloser {
  void operator()(std::FILE* file) const { std::fclose(file); }
};

}  // namespace

std::string check_topology_xml_file(const std::string& path) {
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "rb"));
  if (!file) return "cannot open topology XML '" + path + "': " + std::strerror(errno);
  // The root element sits in the first few hundred bytes of any hwloc export.
  char head[4096];
  size_t size = std::fread(head, 1, sizeof head, file.get());
  if (std::ferror(file.get()))
    return "cannot read topology XML '" + path + "': " + std::strerror(errno);
  if (size == 0) return "topology XML '" + path + "' is empty";
  std::string_view text(head, size);
  size_t root = text.find("<topology");
  if (root == std::string_view::npos) {
    return "'" + path + "' is not an hwloc topology XML (no <topology> element at its start)";
  }
  std::string_view root_tag = text.substr(root, text.find('>', root) - root);
  size_t version = root_tag.find("version=\"");
  if (version != std::string_view::npos && root_tag.substr(version + 9).starts_with("3.")) {
    return "topology XML '" + path +
           "' was written by hwloc 3.x, which this hwloc (2.x) cannot "
           "read; export it again with hwloc 2.x";
  }
  return "";
}

}  // namespace egpu::topo
