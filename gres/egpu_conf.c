/* Tolerant reader for the egpu.conf keys the Slurm plugins need (see
 * egpu_conf.h). The agent has the full parser; this one only looks keys up. */
#include "egpu_conf.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char* egpu_conf_path(void) {
  const char* env = getenv(EGPU_ENV_CONF);
  return (env && env[0]) ? env : EGPU_CONF_DEFAULT_PATH;
}

static const char* skip_blanks(const char* p, const char* end) {
  while (p < end && (*p == ' ' || *p == '\t'))
    p++;
  return p;
}

/* Looks at one line [p, end); returns 1 and copies the value when it is key. */
static int match_line(const char* p, const char* end, const char* key, char* out, size_t outlen) {
  const char* hash = memchr(p, '#', (size_t)(end - p));
  if (hash) end = hash;
  p = skip_blanks(p, end);
  size_t keylen = strlen(key);
  if ((size_t)(end - p) < keylen || strncasecmp(p, key, keylen) != 0) return 0;
  p = skip_blanks(p + keylen, end);
  if (p >= end || *p != '=') return 0;
  p = skip_blanks(p + 1, end);
  while (end > p && isspace((unsigned char)end[-1]))
    end--;
  if (end - p >= 2 && *p == '"' && end[-1] == '"') {
    p++;
    end--;
  }
  size_t len = (size_t)(end - p);
  if (len + 1 > outlen) return -1;
  memcpy(out, p, len);
  out[len] = '\0';
  return 1;
}

int egpu_conf_find(const char* text, const char* key, char* out, size_t outlen) {
  int found = 0;
  const char* p = text;
  while (p && *p) {
    const char* nl = strchr(p, '\n');
    const char* end = nl ? nl : p + strlen(p);
    int rc = match_line(p, end, key, out, outlen);
    if (rc < 0) return -1;
    if (rc > 0) found = 1; /* keep going: the last occurrence wins */
    p = nl ? nl + 1 : NULL;
  }
  return found;
}

int egpu_conf_file_find(const char* path, const char* key, char* out, size_t outlen) {
  FILE* f = fopen(path, "r");
  if (!f) return 0;
  /* egpu.conf is small; cap what we read so a wrong path cannot hurt. */
  enum { MAX_CONF = 1 << 20 };
  char* text = malloc(MAX_CONF + 1);
  if (!text) {
    fclose(f);
    return -1;
  }
  size_t n = fread(text, 1, MAX_CONF, f);
  int read_error = ferror(f);
  fclose(f);
  text[n] = '\0';
  int rc = read_error ? -1 : egpu_conf_find(text, key, out, outlen);
  free(text);
  return rc;
}
