// MetricsEndpoint: the metrics server as the agent keeps it, whether or not
// its address can be had. The address is a TCP port on loopback, and any
// local user may bind an unprivileged one first: a job that holds it while
// the agent restarts (an upgrade, a crash) must not keep the agent from
// starting, and with it every job's enforcement. So a failed bind is
// logged, said in the status, and tried again on a timer until it works.
#pragma once

#include <event2/event.h>

#include <cstdint>
#include <memory>
#include <string>

#include "nodeagent/event_handle.h"
#include "nodeagent/metrics_server.h"

namespace egpu::agent {

class MetricsEndpoint {
 public:
  // Tries to listen at once; on failure again every `retry_ms`. Fails only
  // when the event loop cannot take its timer.
  static Result<std::unique_ptr<MetricsEndpoint>> open(event_base* base, std::string host, int port,
                                                       MetricsServer::Render render,
                                                       const MetricsLimits& limits = {},
                                                       int retry_ms = 2000);

  bool serving() const { return server_ != nullptr; }
  // Why the last try failed (empty while serving).
  const std::string& error() const { return error_; }
  uint64_t failed_tries() const { return failed_tries_; }

 private:
  MetricsEndpoint(event_base* base, std::string host, int port, MetricsServer::Render render,
                  const MetricsLimits& limits, int retry_ms);
  static void on_retry(evutil_socket_t fd, short what, void* arg);
  void try_listen();

  event_base* base_;
  std::string host_;
  int port_;
  MetricsServer::Render render_;
  MetricsLimits limits_;
  int retry_ms_;
  EventHandle retry_;
  std::unique_ptr<MetricsServer> server_;
  std::string error_;
  uint64_t failed_tries_ = 0;
};

}  // namespace egpu::agent
