// Writes seed inputs for the fuzz targets: valid messages of every type, a
// realistic egpu.conf, and instance pages (zeroed, as shims write them, all
// ones, truncated), so fuzzing starts past the magic and the header.
#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "core/protocol/codec.h"
#include "core/shm/pages.h"
#include "core/slo/latency_histogram.h"
#include "instance_page_input.h"

namespace {

void write(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(reinterpret_cast<const char*>(bytes.data()),
             static_cast<std::streamsize>(bytes.size()));
}

void write_instance_page_seeds(const std::string& dir) {
  namespace ip = egpu::fuzz::instance_page;
  using egpu::shm::InstancePage;
  constexpr auto kPage = static_cast<uint16_t>(sizeof(InstancePage));
  const auto save = [&](const std::string& name, const ip::InputWriter& w) {
    write(dir + "/" + name, w.bytes());
  };
  // Two or three instances, burst and cap, each page overwritten with one byte.
  for (const uint8_t fill : {0x00, 0xff}) {
    ip::InputWriter w(true, 10, {30, 20 | 0x80, 50});
    const std::vector<uint8_t> page(kPage, fill);
    for (uint32_t i = 0; i < 3; ++i) {
      w.write(i, 1000, 0, page.data(), kPage);
      w.op(ip::kAttach, i, 2000);
      w.u8(static_cast<uint8_t>(10 + i));
    }
    w.op(ip::kRestart, 0, 5000);
    save(fill == 0 ? "zero_page" : "ones_page", w);
  }
  // Honest shims: two processes in one instance contend with another one,
  // their counters advancing as a real job's do; then a process exits.
  ip::InputWriter w(false, 10, {60, 40});
  InstancePage page[2]{};
  const auto* base = reinterpret_cast<const uint8_t*>(&page[0]);
  const auto procs_at =
      static_cast<uint16_t>(reinterpret_cast<const uint8_t*>(&page[0].procs[0]) - base);
  for (uint32_t i = 0; i < 2; ++i) {
    page[i].magic = egpu::shm::kInstancePageMagic;
    page[i].version = egpu::shm::kLayoutVersion;
    page[i].instance_id = ip::kFirstInstanceId + i;
    page[i].gpu_slot = i;
    w.write(i, 100, 0, &page[i], 24);  // the header, before alloc_lock
  }
  w.op(ip::kAttach, 0, 100);
  w.u8(5);
  for (uint32_t round = 1; round <= 6; ++round) {
    for (uint32_t i = 0; i < 2; ++i) {
      auto& p = page[i].procs[0];
      p.pid = ip::kFirstPid + static_cast<int32_t>(i);
      p.busy = round % 2;
      p.launches = round * 50;
      p.device_ns = round * 1'500'000ull;
      p.mem_bytes = 1ull << 30;
      p.inflight_ns = 1'000'000;
      p.idle_since_ns = 0;
      w.write(i, 1500, procs_at, &p, sizeof p);
    }
  }
  w.op(ip::kKick, 1, 300);
  w.u8(1);
  w.u8(0);
  w.op(ip::kExit, 0, 2000);
  w.u8(1);
  save("honest_page", w);
  // A user truncates its page under the agent, then writes part of it back.
  ip::InputWriter t(true, 5, {10, 10, 10});
  t.op(ip::kTruncate, 1, 1000);
  t.u16(0);
  t.write(1, 1000, procs_at, &page[1].procs[0], sizeof page[1].procs[0]);
  t.op(ip::kTruncate, 2, 1000);
  t.u16(100);
  t.op(ip::kRestart, 2, 1000);
  save("truncated_page", t);
  // Regressions the fuzzer found: counters a job set so that the agent's sum
  // of device time overflowed, or its device-time total went backwards.
  ip::InputWriter overflow(false, 10, {50, 50});
  egpu::shm::ProcSlot two[2]{};
  for (int32_t i = 0; i < 2; ++i) {
    two[i].pid = ip::kFirstPid + i;
    two[i].device_ns = INT64_MAX;
  }
  overflow.write(0, 1000, procs_at, two, sizeof two);
  save("device_ns_overflow", overflow);
  ip::InputWriter wrap(false, 10, {50, 50});
  egpu::shm::ProcSlot one{};
  one.pid = ip::kFirstPid;
  for (const uint64_t v : {1ull << 63, 0ull, 1ull << 63}) {
    one.device_ns = v;
    wrap.write(0, 1000, procs_at, &one, sizeof one);
  }
  save("device_ns_wrap", wrap);
  // A latency reporter that lies: the instance with an objective claims every
  // request took 50 ms and that it used all its share, period after period,
  // beside a lender and a guaranteed neighbour; then its counts go back to
  // zero, then to the largest value there is.
  ip::InputWriter liar(true, 10, {19, 49, 29}, /*latency_roles=*/true);
  const auto counts_at =
      static_cast<uint16_t>(reinterpret_cast<const uint8_t*>(&page[0].latency_counts[0]) - base);
  const uint16_t slow =
      static_cast<uint16_t>(counts_at + 8 * egpu::slo::latency_bucket(50'000'000));
  egpu::shm::ProcSlot busy{};
  busy.pid = ip::kFirstPid;
  busy.busy = 1;
  for (uint64_t period = 1; period <= 40; ++period) {
    const uint64_t requests = period * 100;
    busy.launches = period;
    busy.device_ns = period * 60'000'000;
    liar.write(0, 30'000, procs_at, &busy, sizeof busy);
    liar.write(0, 30'000, slow, &requests, sizeof requests);
  }
  const uint64_t zero = 0, most = UINT64_MAX;
  liar.write(0, 60'000, slow, &zero, sizeof zero);
  liar.write(0, 60'000, slow, &most, sizeof most);
  liar.op(ip::kRestart, 0, 60'000);
  save("latency_liar", liar);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 5) {
    std::fprintf(stderr, "usage: seed_corpus REQUEST_DIR REPLY_DIR CONFIG_DIR INSTANCE_PAGE_DIR\n");
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
  std::vector<Request> requests = {AttachRequest{5, 0, 1},
                                   Request{c},
                                   RemoveRequest{5, kAllSteps, 0},
                                   ResizeRequest{3, 40, 1, 0, 0},
                                   StatusRequest{0, 0},
                                   ShowRequest{3},
                                   ObjectiveRequest{3, 99'000, 0, 40'000'000},
                                   UsageRequest{1, 0, 0}};
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
  // Users' values the same target reads: objectives (--egpu-slo).
  int n = 0;
  for (const std::string objective : {"p99:40ms", "p99.9:1.5s", "off", "p50:2500us"}) {
    write(conf + "/objective" + std::to_string(n++),
          std::vector<uint8_t>(objective.begin(), objective.end()));
  }
  // What egpuctl reads from squeue and scontrol (the same target).
  n = 0;
  for (const std::string listing :
       {"RUNNING|alice|n[1-2,7]\n", "12.0|n[1-2]\n12.batch|n1\n", "n1\nn2\nnode-3.cluster\n"}) {
    write(conf + "/slurm" + std::to_string(n++),
          std::vector<uint8_t>(listing.begin(), listing.end()));
  }
  write_instance_page_seeds(argv[4]);
  return 0;
}
