// The C interface (topo_c.h) over the C++ API. Nothing may throw across it.
#include "core/topo/topo_c.h"

#include <cstdio>
#include <exception>
#include <memory>
#include <string>
#include <vector>

#include "core/topo/int_list.h"
#include "core/topo/topo_report.h"
#include "core/topo/topology.h"

struct egpu_topo {
  egpu::topo::Topology topology;
  // Strings handed out, precomputed so they live as long as the handle.
  std::vector<std::string> cores;
  std::vector<std::string> socket_cores;
  std::vector<std::string> links;
};

namespace {

void set_error(char* err, size_t errlen, const std::string& message) {
  if (err && errlen > 0) std::snprintf(err, errlen, "%s", message.c_str());
}

const egpu::topo::Gpu* gpu_at(const egpu_topo_t* topo, int i) {
  if (!topo || i < 0 || static_cast<size_t>(i) >= topo->topology.gpus.size()) return nullptr;
  return &topo->topology.gpus[static_cast<size_t>(i)];
}

const char* string_at(const egpu_topo_t* topo, const std::vector<std::string>& strings, int i) {
  return gpu_at(topo, i) ? strings[static_cast<size_t>(i)].c_str() : nullptr;
}

}  // namespace

extern "C" {

int egpu_topo_load_ex(const char* xml_path, egpu_topo_log_fn log, void* log_ctx, egpu_topo_t** out,
                      char* err, size_t errlen) {
  if (!out) {
    set_error(err, errlen, "egpu_topo_load: out is NULL");
    return -1;
  }
  *out = nullptr;
  try {
    egpu::topo::LogFn log_fn;
    if (log) {
      log_fn = [log, log_ctx](std::string_view line) { log(std::string(line).c_str(), log_ctx); };
    }
    egpu::topo::LoadResult result;
    if (xml_path && *xml_path) {
      result = egpu::topo::load_from_xml(xml_path, egpu::topo::XmlOptions{log_fn});
    } else {
      egpu::topo::LiveOptions options;
      options.log = log_fn;
      result = egpu::topo::load_live(options);
    }
    if (!result.ok()) {
      set_error(err, errlen, result.error);
      return -1;
    }
    auto handle = std::make_unique<egpu_topo>();
    handle->topology = std::move(*result.topology);
    for (const egpu::topo::Gpu& gpu : handle->topology.gpus) {
      handle->cores.push_back(egpu::topo::gres_cores(handle->topology, gpu, false));
      handle->socket_cores.push_back(egpu::topo::gres_cores(handle->topology, gpu, true));
      handle->links.push_back(egpu::topo::join_comma(gpu.links));
    }
    *out = handle.release();
    return 0;
  } catch (const std::exception& e) {
    set_error(err, errlen, std::string("egpu_topo_load: ") + e.what());
  } catch (...) {
    set_error(err, errlen, "egpu_topo_load: unexpected error");
  }
  return -1;
}

int egpu_topo_load(const char* xml_path, egpu_topo_t** out, char* err, size_t errlen) {
  return egpu_topo_load_ex(xml_path, nullptr, nullptr, out, err, errlen);
}

void egpu_topo_free(egpu_topo_t* topo) {
  delete topo;
}

int egpu_topo_gpu_count(const egpu_topo_t* topo) {
  return topo ? static_cast<int>(topo->topology.gpus.size()) : 0;
}

const char* egpu_topo_gpu_pci_bus_id(const egpu_topo_t* topo, int i) {
  const egpu::topo::Gpu* gpu = gpu_at(topo, i);
  return gpu ? gpu->pci_bus_id.c_str() : nullptr;
}

const char* egpu_topo_gpu_uuid(const egpu_topo_t* topo, int i) {
  const egpu::topo::Gpu* gpu = gpu_at(topo, i);
  return gpu ? gpu->uuid.c_str() : nullptr;
}

const char* egpu_topo_gpu_model(const egpu_topo_t* topo, int i) {
  const egpu::topo::Gpu* gpu = gpu_at(topo, i);
  return gpu ? gpu->model.c_str() : nullptr;
}

uint64_t egpu_topo_gpu_memory_bytes(const egpu_topo_t* topo, int i) {
  const egpu::topo::Gpu* gpu = gpu_at(topo, i);
  return gpu ? gpu->memory_bytes : 0;
}

const char* egpu_topo_gpu_cores(const egpu_topo_t* topo, int i) {
  return topo ? string_at(topo, topo->cores, i) : nullptr;
}

const char* egpu_topo_gpu_socket_cores(const egpu_topo_t* topo, int i) {
  return topo ? string_at(topo, topo->socket_cores, i) : nullptr;
}

const char* egpu_topo_gpu_links(const egpu_topo_t* topo, int i) {
  return topo ? string_at(topo, topo->links, i) : nullptr;
}

}  // extern "C"
