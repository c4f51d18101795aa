#include "core/accounting/admin_comment_c.h"

#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "core/accounting/admin_comment.h"

namespace {

void set_error(char* err, size_t errlen, const char* message) {
  if (err != nullptr && errlen > 0) std::snprintf(err, errlen, "%s", message);
}

}  // namespace

extern "C" int egpu_admin_comment_is_append(const char* update) {
  return update != nullptr && egpu::accounting::is_append_request(update) ? 1 : 0;
}

extern "C" int egpu_admin_comment_merge(const char* existing, const char* update,
                                        unsigned long long job_id, char** out, char* err,
                                        size_t errlen) {
  if (out == nullptr) return -1;
  *out = nullptr;
  try {
    auto merged = egpu::accounting::merge_append_request(existing ? existing : "",
                                                         update ? update : "", job_id);
    if (!merged) {
      set_error(err, errlen, merged.error().c_str());
      return -1;
    }
    *out = static_cast<char*>(std::malloc(merged->size() + 1));
    if (*out == nullptr) {
      set_error(err, errlen, "out of memory");
      return -1;
    }
    std::memcpy(*out, merged->c_str(), merged->size() + 1);
    return 0;
  } catch (...) {
    set_error(err, errlen, "internal error while merging egpu records");
    return -1;
  }
}
