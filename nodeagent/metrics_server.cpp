#include "nodeagent/metrics_server.h"

#include <event2/buffer.h>
#include <event2/keyvalq_struct.h>

#include <cstring>

namespace egpu::agent {

Result<std::unique_ptr<MetricsServer>> MetricsServer::start(event_base* base,
                                                            const std::string& host, int port,
                                                            Render render) {
  evhttp* http = evhttp_new(base);
  if (http == nullptr) return Error{"cannot create the metrics HTTP server"};
  if (evhttp_bind_socket(http, host.c_str(), static_cast<uint16_t>(port)) != 0) {
    evhttp_free(http);
    return Error{"cannot listen for metrics on " + host + ":" + std::to_string(port)};
  }
  evhttp_set_allowed_methods(http, EVHTTP_REQ_GET | EVHTTP_REQ_HEAD);
  evhttp_set_max_headers_size(http, 8192);
  evhttp_set_max_body_size(http, 0);
  evhttp_set_timeout(http, 10);
  std::unique_ptr<MetricsServer> server(new MetricsServer(http, std::move(render)));
  evhttp_set_gencb(http, &MetricsServer::on_request, server.get());
  return server;
}

MetricsServer::~MetricsServer() {
  evhttp_free(http_);
}

void MetricsServer::on_request(evhttp_request* req, void* arg) {
  auto* self = static_cast<MetricsServer*>(arg);
  const char* uri = evhttp_request_get_uri(req);
  if (uri == nullptr || (std::strcmp(uri, "/metrics") != 0 && std::strcmp(uri, "/") != 0)) {
    evhttp_send_error(req, HTTP_NOTFOUND, "try /metrics");
    return;
  }
  const std::string body = self->render_();
  evbuffer* buf = evbuffer_new();
  evbuffer_add(buf, body.data(), body.size());
  evhttp_add_header(evhttp_request_get_output_headers(req), "Content-Type",
                    "text/plain; version=0.0.4; charset=utf-8");
  evhttp_send_reply(req, HTTP_OK, "OK", buf);
  evbuffer_free(buf);
}

}  // namespace egpu::agent
