// The one kernel every workload launches. On the simulated driver its first
// parameter, `ns`, is its duration; on a real GPU the loop of `iters` steps is,
// so device time stays proportional to work even while other contexts
// time-slice the GPU (a clock-based wait would count their time too).

// Written only when the chain hits one value in 2^64: a store to global memory
// the compiler must keep, so the loop that feeds it cannot be removed.
__device__ unsigned long long egpu_spin_sink;

extern "C" __global__ void egpu_spin(unsigned long long ns, unsigned long long iters) {
  // A xorshift-multiply chain: no closed form, so the compiler must run every step.
  unsigned long long x = ns ^ (0x9e3779b97f4a7c15ULL + threadIdx.x);
  for (unsigned long long i = 0; i < iters; ++i) {
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x << 7;
  }
  if (x == 0x2545f4914f6cdd1dULL) {
    egpu_spin_sink = x;
  }
}

// ddp-like's all-reduce. On the simulated driver its name makes it a
// collective: parameters (duration ns, communicator id, ranks), it waits for
// every rank's launch, then runs `ns`. On a real GPU it only spins like
// egpu_spin: the ranks are not connected (no NCCL), so it does not wait.
extern "C" __global__ void simgpu_collective_allreduce(unsigned long long ns,
                                                       unsigned long long comm, unsigned int ranks,
                                                       unsigned long long iters) {
  unsigned long long x = ns ^ comm ^ ranks ^ (0x9e3779b97f4a7c15ULL + threadIdx.x);
  for (unsigned long long i = 0; i < iters; ++i) {
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ULL;
    x ^= x << 7;
  }
  if (x == 0x2545f4914f6cdd1dULL) {
    egpu_spin_sink = x;
  }
}
