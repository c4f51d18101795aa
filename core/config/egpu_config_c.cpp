// The C interface (egpu_config_c.h) over the C++ parser. Nothing may throw
// across it: the plugin that calls it is C, inside slurmd.
#include "core/config/egpu_config_c.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <string>

#include "core/config/egpu_config.h"

struct egpu_conf {
  egpu::config::EgpuConfig config;
};

namespace {

void set_error(char* err, size_t errlen, const std::string& message) {
  if (err != nullptr && errlen > 0) std::snprintf(err, errlen, "%s", message.c_str());
}

// Hands a parse result to C: 0 and *out, or -1 and the message.
int hand_out(egpu::Result<egpu::config::EgpuConfig> parsed, egpu_conf_t** out, char* err,
             size_t errlen) {
  if (!parsed.ok()) {
    set_error(err, errlen, parsed.error());
    return -1;
  }
  *out = new egpu_conf{std::move(parsed.value())};
  return 0;
}

// Runs body; an exception becomes -1 and a message naming the function.
template <typename Body>
int without_throwing(const char* function, char* err, size_t errlen, Body body) {
  try {
    return body();
  } catch (const std::exception& e) {
    set_error(err, errlen, std::string(function) + ": " + e.what());
  } catch (...) {
    set_error(err, errlen, std::string(function) + ": unexpected error");
  }
  return -1;
}

}  // namespace

extern "C" {

const char* egpu_conf_path(void) {
  const char* env = std::getenv(EGPU_ENV_CONF);
  return env != nullptr && env[0] != '\0' ? env : EGPU_CONF_DEFAULT_PATH;
}

int egpu_conf_load(const char* path, unsigned flags, egpu_conf_t** out, char* err, size_t errlen) {
  if (out == nullptr || path == nullptr) {
    set_error(err, errlen, "egpu_conf_load: path or out is NULL");
    return -1;
  }
  *out = nullptr;
  if ((flags & ~EGPU_CONF_MISSING_IS_DEFAULTS) != 0) {
    set_error(err, errlen, "egpu_conf_load: unknown flags " + std::to_string(flags));
    return -1;
  }
  return without_throwing("egpu_conf_load", err, errlen, [&] {
    if ((flags & EGPU_CONF_MISSING_IS_DEFAULTS) != 0 && ::access(path, F_OK) != 0 &&
        errno == ENOENT) {
      *out = new egpu_conf{};
      return 0;
    }
    return hand_out(egpu::config::load_egpu_config(path), out, err, errlen);
  });
}

int egpu_conf_parse(const char* text, const char* source, egpu_conf_t** out, char* err,
                    size_t errlen) {
  if (out == nullptr || text == nullptr) {
    set_error(err, errlen, "egpu_conf_parse: text or out is NULL");
    return -1;
  }
  *out = nullptr;
  return without_throwing("egpu_conf_parse", err, errlen, [&] {
    const char* name = source != nullptr ? source : "egpu.conf";
    return hand_out(egpu::config::parse_egpu_config(text, name), out, err, errlen);
  });
}

void egpu_conf_free(egpu_conf_t* conf) {
  delete conf;
}

const char* egpu_conf_topology_xml(const egpu_conf_t* conf) {
  return conf != nullptr ? conf->config.topology_xml.c_str() : "";
}

int egpu_conf_pack_nodes(const egpu_conf_t* conf) {
  return conf != nullptr && conf->config.pack_nodes ? 1 : 0;
}

}  // extern "C"
