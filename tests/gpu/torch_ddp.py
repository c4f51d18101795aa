#!/usr/bin/env python3
"""torch_ddp: DistributedDataParallel training with the NCCL backend, for tests/gpu/validate.

One process per rank (RANK and WORLD_SIZE from the environment, or --rank and
--world-size), every rank on GPU 0 (torch.cuda.set_device(0)); the ranks meet
through a file:// store, WORK_DIR/RUN_ID.store (a new RUN_ID per run: the file
must not exist yet). Trains a ReLU MLP wrapped in DistributedDataParallel on
fixed random data, its own per rank, so every iteration all-reduces the
gradients with NCCL. Each iteration also all-reduces a stop flag that a rank
raises when its time is up, so the ranks stop on the same iteration and none
waits in a collective its peers never enter; the flag's .item() waits for the
iteration. Warm-up iterations are not counted. At the end the ranks compare
their parameters (DDP keeps them equal): a difference is an error.

Bounded: init_process_group gets --timeout-s as its timeout, and a watchdog
thread ends the process ("timed out in STEP", exit 1) when a step overruns;
faulthandler backs it up (and dumps every thread's stack) should the GIL be
held. Prints one JSON object on stdout; with --progress a line
"torch-ddp[pid] t=<s>s iterations=<n>" on stderr every second (counted
iterations only). With the egpu shim preloaded and EGPU_DEBUG=1 the summary
carries the shim's per-wrapper call counters.
"""
import argparse
import datetime
import faulthandler
import json
import os
import sys
import threading
import time

import shim_counters  # tests/gpu/shim_counters.py, beside this file


class Watchdog:
    """Ends the process when the current step outlives its deadline."""

    def __init__(self, rank):
        self.rank = rank
        self.lock = threading.Lock()
        self.step, self.deadline = "start", None
        threading.Thread(target=self._watch, daemon=True).start()

    def fail(self, why):
        """Says which step failed and ends the process at once (an orderly
        exit could wait in NCCL's teardown for a peer that is gone)."""
        print(f"torch_ddp[rank {self.rank}]: {why} in {self.step}", file=sys.stderr, flush=True)
        os._exit(1)

    def arm(self, step, seconds, backstop=False):
        with self.lock:
            self.step, self.deadline = step, time.monotonic() + seconds
        if backstop:  # re-arming starts a thread: once per phase, not per iteration
            faulthandler.dump_traceback_later(seconds + 10, exit=True)

    def _watch(self):
        while True:
            time.sleep(0.2)
            with self.lock:
                deadline = self.deadline
            if deadline is not None and time.monotonic() > deadline:
                self.fail("timed out")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rank", type=int, default=int(os.environ.get("RANK", "-1")))
    parser.add_argument("--world-size", type=int,
                        default=int(os.environ.get("WORLD_SIZE", "0")))
    parser.add_argument("--work-dir", required=True, help="folder of the file:// store")
    parser.add_argument("--run-id", default="ddp", help="the store is WORK_DIR/RUN_ID.store")
    parser.add_argument("--duration-s", type=float, default=10.0, help="counted run time")
    parser.add_argument("--warmup-s", type=float, default=3.0, help="uncounted run time first")
    parser.add_argument("--timeout-s", type=float, default=60.0,
                        help="bound of each step (init, first collective, one iteration)")
    parser.add_argument("--width", type=int, default=1024)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--batch", type=int, default=16384)
    parser.add_argument("--label", default="ddp")
    parser.add_argument("--progress", action="store_true")
    args = parser.parse_args()
    if not 0 <= args.rank < args.world_size:
        parser.error("need 0 <= rank < world size (RANK, WORLD_SIZE or --rank, --world-size)")

    dog = Watchdog(args.rank)
    try:
        return run(args, dog)
    except Exception as e:  # noqa: BLE001 (any failure: one line naming the step)
        dog.fail(f"{type(e).__name__}: {e}")


def run(args, dog):
    dog.arm("importing torch", args.timeout_s, backstop=True)
    import torch  # imported late: --help works without torch
    import torch.distributed as dist

    if not torch.cuda.is_available():
        print("torch_ddp: torch sees no CUDA device", file=sys.stderr)
        return 1
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.cuda.set_device(0)
    device = torch.device("cuda", 0)

    dog.arm("init_process_group", args.timeout_s + 10, backstop=True)
    init_start = time.monotonic()
    store = os.path.join(os.path.abspath(args.work_dir), f"{args.run_id}.store")
    options = dict(backend="nccl", init_method=f"file://{store}", rank=args.rank,
                   world_size=args.world_size,
                   timeout=datetime.timedelta(seconds=args.timeout_s))
    try:  # device_id: the NCCL communicator is made here, under this timeout
        dist.init_process_group(**options, device_id=device)
    except TypeError:  # a torch without device_id
        dist.init_process_group(**options)

    dog.arm("DistributedDataParallel (parameter broadcast)", args.timeout_s + 10, backstop=True)
    gen = torch.Generator(device=device).manual_seed(1 + args.rank)
    torch.manual_seed(1)  # the same initial model on every rank (DDP broadcasts rank 0's anyway)
    layers = []
    for _ in range(args.depth):
        layers += [torch.nn.Linear(args.width, args.width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers[:-1]).to(device)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[0])
    opt = torch.optim.SGD(ddp.parameters(), lr=1e-4)
    x = torch.randn(args.batch, args.width, device=device, generator=gen)
    y = torch.randn(args.batch, args.width, device=device, generator=gen)
    flag = torch.zeros(1, device=device)
    init_s = time.monotonic() - init_start

    def step(stop):
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(ddp(x), y)
        loss.backward()  # DDP all-reduces the gradient buckets here
        opt.step()
        flag.fill_(1.0 if stop else 0.0)
        dist.all_reduce(flag)
        return loss, flag.item() > 0  # waits for the iteration

    # Per-iteration deadlines are the watchdog's; faulthandler bounds the phase.
    faulthandler.dump_traceback_later(args.warmup_s + args.duration_s + args.timeout_s + 10,
                                      exit=True)
    warm_end = time.monotonic() + args.warmup_s
    warm_iterations = 0
    stopped = False
    while time.monotonic() < warm_end and not stopped:
        dog.arm("the warm-up", args.timeout_s)
        _, stopped = step(False)
        warm_iterations += 1

    start = time.monotonic()
    next_progress = start + 1.0
    iterations = 0
    loss = None
    while not stopped:
        dog.arm("the training loop", args.timeout_s)
        loss, stopped = step(time.monotonic() - start >= args.duration_s)
        iterations += 1
        now = time.monotonic()
        if args.progress and now >= next_progress:
            next_progress += 1.0
            print(f"torch-ddp[{os.getpid()}] t={now - start:.1f}s iterations={iterations}",
                  file=sys.stderr, flush=True)
    wall_s = time.monotonic() - start

    # DDP keeps the replicas equal: their parameter sums must agree exactly.
    dog.arm("comparing the parameters", args.timeout_s, backstop=True)
    checksum = torch.stack([p.detach().double().sum() for p in model.parameters()]).sum()
    low, high = checksum.clone().reshape(1), checksum.clone().reshape(1)
    dist.all_reduce(low, op=dist.ReduceOp.MIN)
    dist.all_reduce(high, op=dist.ReduceOp.MAX)
    in_sync = low.item() == high.item()
    dog.arm("destroy_process_group", args.timeout_s, backstop=True)
    dist.destroy_process_group()
    faulthandler.cancel_dump_traceback_later()
    if not in_sync:
        print(f"torch_ddp[rank {args.rank}]: parameters differ between ranks "
              f"(sums {low.item()!r} .. {high.item()!r})", file=sys.stderr)
        return 1
    try:
        version = ".".join(map(str, torch.cuda.nccl.version()))
    except (AttributeError, RuntimeError, TypeError):
        version = None
    summary = {
        "workload": "torch-ddp",
        "label": args.label,
        "rank": args.rank,
        "world_size": args.world_size,
        "device_name": torch.cuda.get_device_name(device),
        "torch": torch.__version__,
        "nccl_version": version,
        "width": args.width, "depth": args.depth, "batch": args.batch,
        "init_s": round(init_s, 3),
        "warmup_iterations": warm_iterations,
        "iterations": iterations,
        "wall_s": round(wall_s, 4),
        "it_per_s": round(iterations / wall_s, 3) if wall_s > 0 else 0.0,
        "last_loss": loss.item() if loss is not None else None,
        "params_in_sync": in_sync,
        "shim": shim_counters.read(),
    }
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
