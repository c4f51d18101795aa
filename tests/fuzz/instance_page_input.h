// The input format of the instance_page fuzz target, shared with the seed
// corpus writer so seeds stay valid when the format changes.
//
// Header, kHeaderBytes:
//   [0]    bit 0: three instances (else two); bits 1-6: slice length - 1 in ms
//          (% 50); bit 7: latency roles: a burst instance 0 has a latency
//          objective (p99:5ms), a burst instance 1 lends
//   [1..3] one byte per instance: bits 0-6: units - 1 (% 100; they may
//          overbook the GPU); bit 7: cap mode, else burst
// Instance i has id kFirstInstanceId + i, GPU slot i, and starts with process
// kFirstPid + i attached (in process slot 0). The agent's latency control
// runs at every tick, on what the pages say.
// Then operations until the input ends; each starts with
//   [op]   bits 0-1: instance (% count); bits 2-4: Op
//   [dt_lo][dt_hi][shift]  simulated time that passes after it: dt << (shift % 24) ns
// followed by the Op's own bytes (missing bytes read as zeros):
//   kWrite*:   [off_lo][off_hi][len_lo][len_hi] then len bytes written at
//              off (% page size) of the instance page, as its user can
//   kAttach:   [p]  process 100000 + p attaches (the agent's attach)
//   kExit:     [k]  the k-th attached process (% count) exits (the agent's reclaim)
//   kKick:     [n]  then n bytes sent as one datagram on the wake channel
//   kTruncate: [s_lo][s_hi]  the user truncates the page to s (% page size) bytes
//   kRestart:  the agent restarts and recovers the GPU from its pages
#pragma once

#include <cstdint>
#include <vector>

namespace egpu::fuzz::instance_page {

inline constexpr size_t kHeaderBytes = 4;

enum Op : uint8_t {
  kWrite0 = 0,  // writes are most of what a job can do to its page
  kWrite1 = 1,
  kWrite2 = 2,
  kAttach = 3,
  kExit = 4,
  kKick = 5,
  kTruncate = 6,
  kRestart = 7,
};

// The instance ids and the first process ids the harness uses, so seeds can
// write pages that look like the real ones.
inline constexpr uint64_t kFirstInstanceId = 1;
inline constexpr int32_t kFirstPid = 100000;

// Builds inputs (for seeds): a header, then operations.
class InputWriter {
 public:
  InputWriter(bool three, uint8_t slice_ms, std::vector<uint8_t> units_and_modes,
              bool latency_roles = false) {
    bytes_.push_back(static_cast<uint8_t>((three ? 1 : 0) | (((slice_ms - 1) & 0x3f) << 1) |
                                          (latency_roles ? 0x80 : 0)));
    units_and_modes.resize(kHeaderBytes - 1);
    bytes_.insert(bytes_.end(), units_and_modes.begin(), units_and_modes.end());
  }
  // `dt_us` microseconds pass after the operation.
  void op(Op op, uint32_t instance, uint32_t dt_us) {
    bytes_.push_back(static_cast<uint8_t>((instance & 3) | (op << 2)));
    // dt_us * 1000 ns as dt << 10 (1.024 us steps): close enough for seeds.
    const uint32_t dt = dt_us < 0xffff ? dt_us : 0xffff;
    bytes_.push_back(static_cast<uint8_t>(dt & 0xff));
    bytes_.push_back(static_cast<uint8_t>(dt >> 8));
    bytes_.push_back(10);
  }
  void write(uint32_t instance, uint32_t dt_us, uint16_t offset, const void* data, uint16_t len) {
    op(kWrite0, instance, dt_us);
    u16(offset);
    u16(len);
    const auto* p = static_cast<const uint8_t*>(data);
    bytes_.insert(bytes_.end(), p, p + len);
  }
  void u8(uint8_t v) { bytes_.push_back(v); }
  void u16(uint16_t v) {
    bytes_.push_back(static_cast<uint8_t>(v & 0xff));
    bytes_.push_back(static_cast<uint8_t>(v >> 8));
  }
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  std::vector<uint8_t> bytes_;
};

}  // namespace egpu::fuzz::instance_page
