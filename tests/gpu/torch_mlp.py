#!/usr/bin/env python3
"""torch_mlp: a small PyTorch training loop (a matmul MLP) for tests/gpu/validate.

Trains a ReLU MLP on fixed random data with SGD; each iteration waits for its
loss (as a training loop that logs it does), so iterations/s measure the GPU
time the process got. Warm-up iterations (cuBLAS set-up, allocator growth) are
not counted. Prints one JSON object on stdout; with --progress a line
"torch-mlp[pid] t=<s>s iterations=<n>" on stderr every second (counted
iterations only). With the egpu shim preloaded and EGPU_DEBUG=1 the summary
carries the shim's per-wrapper call counters. With --cuda-graph a whole
training step is captured once into a CUDA graph (torch.cuda.graph) and each
iteration replays it, as torch.compile "reduce-overhead" does.
"""
import argparse
import json
import os
import sys
import time

import shim_counters  # tests/gpu/shim_counters.py, beside this file


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration-s", type=float, default=10.0, help="counted run time")
    parser.add_argument("--warmup-s", type=float, default=3.0, help="uncounted run time first")
    parser.add_argument("--width", type=int, default=8192)
    parser.add_argument("--depth", type=int, default=4)
    parser.add_argument("--batch", type=int, default=8192)
    parser.add_argument("--label", default="torch")
    parser.add_argument("--progress", action="store_true")
    parser.add_argument("--cuda-graph", action="store_true",
                        help="capture a training step once, replay it each iteration")
    args = parser.parse_args()

    import torch  # imported late: --help works without torch

    if not torch.cuda.is_available():
        print("torch_mlp: torch sees no CUDA device", file=sys.stderr)
        return 1
    torch.backends.cuda.matmul.allow_tf32 = True
    device = torch.device("cuda", 0)
    gen = torch.Generator(device=device).manual_seed(1)
    layers = []
    for _ in range(args.depth):
        layers += [torch.nn.Linear(args.width, args.width), torch.nn.ReLU()]
    model = torch.nn.Sequential(*layers[:-1]).to(device)
    opt = torch.optim.SGD(model.parameters(), lr=1e-4)
    x = torch.randn(args.batch, args.width, device=device, generator=gen)
    y = torch.randn(args.batch, args.width, device=device, generator=gen)

    def step():
        opt.zero_grad(set_to_none=True)
        loss = torch.nn.functional.mse_loss(model(x), y)
        loss.backward()
        opt.step()
        return loss.item()  # waits for the iteration, as logging the loss does

    if args.cuda_graph:
        # torch's recipe: warm up on a side stream, then capture one step.
        side = torch.cuda.Stream()
        side.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(side):
            for _ in range(3):
                step()
        torch.cuda.current_stream().wait_stream(side)
        graph = torch.cuda.CUDAGraph()
        opt.zero_grad(set_to_none=True)
        with torch.cuda.graph(graph):
            static_loss = torch.nn.functional.mse_loss(model(x), y)
            static_loss.backward()
            opt.step()

        def step():  # noqa: F811 (the replayed step replaces the eager one)
            graph.replay()
            return static_loss.item()

    warm_end = time.monotonic() + args.warmup_s
    warm_iterations = 0
    while time.monotonic() < warm_end or warm_iterations < 2:
        step()
        warm_iterations += 1

    start = time.monotonic()
    next_progress = start + 1.0
    iterations = 0
    loss = float("nan")
    while time.monotonic() - start < args.duration_s:
        loss = step()
        iterations += 1
        now = time.monotonic()
        if args.progress and now >= next_progress:
            next_progress += 1.0
            print(f"torch-mlp[{os.getpid()}] t={now - start:.1f}s iterations={iterations}",
                  file=sys.stderr, flush=True)
    wall_s = time.monotonic() - start
    summary = {
        "workload": "torch-mlp",
        "label": args.label,
        "device_name": torch.cuda.get_device_name(device),
        "torch": torch.__version__,
        "width": args.width, "depth": args.depth, "batch": args.batch,
        "cuda_graph": args.cuda_graph,
        "warmup_iterations": warm_iterations,
        "iterations": iterations,
        "wall_s": round(wall_s, 4),
        "it_per_s": round(iterations / wall_s, 3) if wall_s > 0 else 0.0,
        "last_loss": loss,
        "shim": shim_counters.read(),
    }
    print(json.dumps(summary), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
