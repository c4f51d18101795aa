// Writes seed inputs for the fuzz targets: valid messages of every type and
// a realistic egpu.conf, so fuzzing starts past the magic and the header.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "core/protocol/codec.h"

namespace {

void write(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: seed_corpus REQUEST_DIR REPLY_DIR CONFIG_DIR\n");
    return 2;
  }
  using namespace egpu::protocol;
  const std::string req = argv[1], rep = argv[2], conf = argv[3];
  CreateRequest c{};
  c.job_id = 5;
  c.gpu_index = 1;
  c.uid = 1000;
  c.gid = 1000;
  c.units = 30;
  c.job_units = 60;
  c.flags = kCreateUmbrella;
  std::vector<Request> requests = {
      AttachRequest{5, 0, 1},  Request{c},          RemoveRequest{5, kAllSteps, 0},
      ResizeRequest{3, 40, 1}, StatusRequest{0, 0}, ShowRequest{3}};
  for (size_t i = 0; i < requests.size(); ++i) {
    write(req + "/seed" + std::to_string(i),
          encode_request(requests[i], static_cast<uint32_t>(i + 1)));
  }
  Reply r;
  r.status = ReplyStatus::kDenied;
  r.text = "{\"gpus\":[]}";
  r.flags = kReplyMore;
  write(rep + "/seed0", encode_reply(r, 9));
  const std::string text =
      "# egpu.conf\nSliceMs=10 WindowMs=500\nDefaultMode=burst\nFailMode=open\n"
      "MetricsAddress=127.0.0.1:9464\nGpuMemory=80G\nTopologyXml=\"/etc/egpu/topo.xml\"\n";
  write(conf + "/seed0", std::vector<uint8_t>(text.begin(), text.end()));
  return 0;
}
