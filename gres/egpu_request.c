/* See egpu_request.h. */
#include "egpu_request.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

/* Parses a count with an optional k/m/g suffix; -1 when it is not one. */
static int parse_count(const char* s, size_t len, uint64_t* out) {
  if (len == 0 || !isdigit((unsigned char)s[0])) return -1;
  uint64_t v = 0;
  size_t i = 0;
  for (; i < len && isdigit((unsigned char)s[i]); i++) {
    if (v > (UINT64_MAX - 9) / 10) return -1;
    v = v * 10 + (uint64_t)(s[i] - '0');
  }
  if (i < len) {
    if (i + 1 != len) return -1;
    int shift;
    switch (tolower((unsigned char)s[i])) {
      case 'k':
        shift = 10;
        break;
      case 'm':
        shift = 20;
        break;
      case 'g':
        shift = 30;
        break;
      default:
        return -1;
    }
    if (v > (UINT64_MAX >> shift)) return -1;
    v <<= shift;
  }
  *out = v;
  return 0;
}

/* One entry such as "gres/egpu:v100:30"; returns NONE/FOUND/BAD. */
static egpu_request_status_t parse_entry(const char* s, size_t len, uint64_t* units) {
  static const char* const prefixes[] = {"gres/", "gres:"};
  for (size_t i = 0; i < 2; i++) {
    size_t plen = strlen(prefixes[i]);
    if (len >= plen && strncmp(s, prefixes[i], plen) == 0) {
      s += plen;
      len -= plen;
      break;
    }
  }
  size_t name_len = 0;
  while (name_len < len && s[name_len] != ':')
    name_len++;
  if (name_len != 4 || strncmp(s, "egpu", 4) != 0) return EGPU_REQUEST_NONE;
  if (name_len == len) {
    *units = 1;
    return EGPU_REQUEST_FOUND;
  }
  /* After the name: "count", "type" or "type:count". */
  const char* rest = s + name_len + 1;
  size_t rest_len = len - name_len - 1;
  const char* colon = memchr(rest, ':', rest_len);
  if (!colon) {
    /* A leading digit means a count. One that does not read as one
     * ("30q", past 64 bits) Slurm would take for a GPU type no node has:
     * refused here as unreadable. */
    if (rest_len > 0 && isdigit((unsigned char)rest[0]))
      return parse_count(rest, rest_len, units) == 0 ? EGPU_REQUEST_FOUND : EGPU_REQUEST_BAD;
    *units = 1; /* a type without a count */
    return EGPU_REQUEST_FOUND;
  }
  const char* count = colon + 1;
  size_t count_len = rest_len - (size_t)(count - rest);
  if (memchr(count, ':', count_len) || parse_count(count, count_len, units) != 0)
    return EGPU_REQUEST_BAD;
  return EGPU_REQUEST_FOUND;
}

egpu_request_status_t egpu_request_units(const char* tres, uint64_t* units) {
  *units = 0;
  if (!tres || !tres[0]) return EGPU_REQUEST_NONE;
  int entries = 0;
  const char* p = tres;
  while (*p) {
    const char* comma = strchr(p, ',');
    size_t len = comma ? (size_t)(comma - p) : strlen(p);
    uint64_t n = 0;
    egpu_request_status_t st = parse_entry(p, len, &n);
    if (st == EGPU_REQUEST_BAD) return EGPU_REQUEST_BAD;
    if (st == EGPU_REQUEST_FOUND) {
      entries++;
      *units = n;
    }
    if (!comma) break;
    p = comma + 1;
  }
  if (entries == 0) return EGPU_REQUEST_NONE;
  return entries == 1 ? EGPU_REQUEST_FOUND : EGPU_REQUEST_SEVERAL;
}
