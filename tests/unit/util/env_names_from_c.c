/* Compiled as C: the names header serves the C plugin (gres/) as much as the
 * C++ parts, so the test reads the names through a C translation unit. */
#include "core/env/egpu_env_names.h"

const char* const egpu_test_env_names_from_c[] = {
    EGPU_ENV_GPU_INDICES, EGPU_ENV_UNITS,  EGPU_ENV_MEM_QUOTA, EGPU_ENV_GPU_UUIDS,
    EGPU_ENV_NODE,        EGPU_ENV_JOB_ID, EGPU_ENV_STEP_ID,   EGPU_ENV_SOCKET,
    EGPU_ENV_FAIL_MODE,   EGPU_ENV_CONF,   EGPU_ENV_DEBUG,     0};
