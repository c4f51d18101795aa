#include "nodeagent/metrics_endpoint.h"

#include "core/util/log.h"
#include "nodeagent/event_loop.h"

namespace egpu::agent {

MetricsEndpoint::MetricsEndpoint(event_base* base, std::string host, int port,
                                 MetricsServer::Render render, const MetricsLimits& limits,
                                 int retry_ms)
    : base_(base),
      host_(std::move(host)),
      port_(port),
      render_(std::move(render)),
      limits_(limits),
      retry_ms_(retry_ms) {}

Result<std::unique_ptr<MetricsEndpoint>> MetricsEndpoint::open(event_base* base, std::string host,
                                                               int port,
                                                               MetricsServer::Render render,
                                                               const MetricsLimits& limits,
                                                               int retry_ms) {
  std::unique_ptr<MetricsEndpoint> e(
      new MetricsEndpoint(base, std::move(host), port, std::move(render), limits, retry_ms));
  e->retry_.reset(evtimer_new(base, &MetricsEndpoint::on_retry, e.get()));
  if (!e->retry_) return Error{"cannot add the metrics endpoint's retry to the event loop"};
  e->try_listen();
  return e;
}

void MetricsEndpoint::on_retry(evutil_socket_t, short, void* arg) {
  static_cast<MetricsEndpoint*>(arg)->try_listen();
}

void MetricsEndpoint::try_listen() {
  auto server = MetricsServer::start(base_, host_, port_, render_, limits_);
  if (server) {
    server_ = std::move(*server);
    if (failed_tries_ > 0) {
      EGPU_LOG_INFO("metrics: serving on %s:%d after all (%llu failed tries)", host_.c_str(), port_,
                    static_cast<unsigned long long>(failed_tries_));
    }
    error_.clear();
    return;
  }
  // Said once, and again only when the reason changes: a squatter that
  // keeps the port must not fill the journal.
  if (server.error() != error_) {
    EGPU_LOG_WARN(
        "%s; the agent runs without metrics and tries again every %d ms (a port from 1024 up "
        "can be bound first by any local user: see MetricsAddress)",
        server.error().c_str(), retry_ms_);
  }
  error_ = server.error();
  ++failed_tries_;
  const timeval tv = timeval_from_ns(int64_t{retry_ms_} * 1'000'000);
  if (event_add(retry_.get(), &tv) != 0) {
    EGPU_LOG_ERROR("metrics: cannot schedule the next try; metrics stay off");
  }
}

}  // namespace egpu::agent
