/* C interface to core/accounting/admin_comment.h for job_submit/egpu: the
 * merge of an egpu append request into a job's AdminComment. No function
 * throws. */
#ifndef EGPU_CORE_ACCOUNTING_ADMIN_COMMENT_C_H
#define EGPU_CORE_ACCOUNTING_ADMIN_COMMENT_C_H

/* C header in C pointer style; clang-format is set up for the C++ files. */
/* clang-format off */
#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

/* Non-zero when an AdminComment update (may be NULL) asks to append egpu
 * records rather than to set the comment. */
int egpu_admin_comment_is_append(const char *update);

/* Job `job_id`'s AdminComment after the append request `update` on
 * `existing` (NULL: none). Returns 0 and *out (release it with free()); else
 * -1, *out NULL and a message in err naming what is wrong with the request
 * (records of another job included). */
int egpu_admin_comment_merge(const char *existing, const char *update, unsigned long long job_id,
                             char **out, char *err, size_t errlen);

#ifdef __cplusplus
}
#endif

/* clang-format on */
#endif
