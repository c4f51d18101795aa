/* egpu latency reporting: for programs that know their request boundaries.

   A step with a latency objective (srun --egpu-slo=p99:40ms, egpuctl slo)
   is judged by latency samples. Without code changes the egpu shim samples
   bursts of GPU work (first launch after idle to the synchronise that finds
   the work done): right for a server that runs one request or batch at a
   time. A server whose requests overlap on the GPU, or whose latency
   includes CPU work (tokenising, queueing), should report each request
   itself; once a process reports, its bursts are no longer counted.

   The functions live in libegpu-shim.so, which Slurm preloads into egpu
   steps. Look them up at run time (dlsym(RTLD_DEFAULT, "egpu_report_latency")),
   so the program also runs where the shim is not loaded; a Python server can
   use ctypes (etc/examples/egpu_latency.py). Thread-safe, never block, and
   never fail the program: a return below 0 only says the sample went
   nowhere. */
#ifndef EGPU_LATENCY_H
#define EGPU_LATENCY_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define EGPU_LATENCY_OK 0
#define EGPU_LATENCY_NOT_ATTACHED (-1) /* no egpu instance to report to */
#define EGPU_LATENCY_INVALID (-2) /* a negative latency, or a token not from egpu_request_begin */

/* One request took `nanoseconds` (from its arrival to its answer). */
int egpu_report_latency(int64_t nanoseconds);

/* The same, timed by egpu: a token at the request's arrival, handed back at
   its answer (any thread). */
uint64_t egpu_request_begin(void);
int egpu_request_end(uint64_t token);

#ifdef __cplusplus
}
#endif

#endif /* EGPU_LATENCY_H */
