// MetricsServer: Prometheus text exposition over HTTP (libevent's evhttp) on a
// loopback address, off unless MetricsAddress is set.
#pragma once

#include <event2/event.h>
#include <event2/http.h>

#include <functional>
#include <memory>
#include <string>

#include "core/util/result.h"

namespace egpu::agent {

class MetricsServer {
 public:
  using Render = std::function<std::string()>;
  static Result<std::unique_ptr<MetricsServer>> start(event_base* base, const std::string& host,
                                                      int port, Render render);
  ~MetricsServer();

 private:
  MetricsServer(evhttp* http, Render render) : http_(http), render_(std::move(render)) {}
  static void on_request(evhttp_request* req, void* arg);

  evhttp* http_;
  Render render_;
};

}  // namespace egpu::agent
