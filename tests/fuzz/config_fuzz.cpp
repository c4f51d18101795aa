// libFuzzer target: egpu.conf parsing (admins' text) and byte sizes (users'
// --egpu-mem values).
#include <cstdint>
#include <string_view>

#include "core/config/byte_size.h"
#include "core/config/egpu_config.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  (void)egpu::config::parse_egpu_config(text, "fuzz.conf");
  (void)egpu::config::parse_byte_size(text.substr(0, 64));
  return 0;
}
