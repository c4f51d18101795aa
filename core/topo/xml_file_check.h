// Explains why an hwloc XML file cannot be used before hwloc tries it: hwloc
// answers every failure with EINVAL (or silently loads the live system when the
// file is missing), which tells an operator nothing.
#ifndef EGPU_CORE_TOPO_XML_FILE_CHECK_H
#define EGPU_CORE_TOPO_XML_FILE_CHECK_H

#include <string>

namespace egpu::topo {

// "" when the file is readable, not empty and looks like an hwloc 1.x/2.x
// topology; else a sentence starting with the path.
std::string check_topology_xml_file(const std::string& path);

}  // namespace egpu::topo

#endif
