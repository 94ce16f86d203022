#!/usr/bin/env python3
"""pipe-peer.py: lesson 13's pipelined step as PyTorch's torch.distributed.pipelining runs it, timed.

The peer that lesson 13's figures are set beside (issue 46), as tools/ddp-peer.py is 12's: the same
model, stages, batch, micro-batches and precision, trained by PipelineStage with ScheduleGPipe and
Schedule1F1B on the same GPUs, in the same run as 13 (tools/multi-gpu-figures). Python because the
peer is PyTorch itself. Nothing in the course depends on it.

usage: torchrun --standalone --nproc-per-node 2 tools/pipe-peer.py [options]     two GPUs, two stages
       torchrun --standalone --nproc-per-node 2 tools/pipe-peer.py --cpu --hidden 64 --batches 2
                                                    the script checked without a GPU (gloo, no timing)

Round-robin: --warmup untimed rounds, then --rounds timed ones; each round runs, for every count of
--micro-batches and every schedule of --schedules, --batches batches from the same initial weights.
A run's step is its wall time over its batches, the GPU synchronised before and after and the ranks
lined up by a barrier first (13's harness times a run the same way). Rank 0 prints one JSON object:
for each micro-batch count and schedule the slowest stage's median step and its spread (min and max
over the rounds), every stage's median, and whether the losses of the last stage were finite.

What matches lesson 13 (solutions/13_pipeline_parallel, tools/bench's 13m4/13m8/13m16):
  - the model: --in inputs, --layers hidden layers of --hidden units, --out outputs (weight layers
    L = --layers + 1), ReLU after every layer but the last, Glorot-uniform weights, zero biases;
  - the stages: stage s of p holds weight layers 1 + s L / p to (s + 1) L / p (13's 1-2 | 3-4);
  - the loss: sum |y - t|^2 / (2 x batch) over the batch, each micro-batch its share (the schedule's
    scale_grads divides the summed gradients by the micro-batch count); plain SGD at --lr 0.02;
  - fp32 throughout, TF32 off (13's cublasSgemm never uses it);
  - the schedules: GPipe (every forward, then every backward) and 1F1B (PipeDream-flush).
What cannot match:
  - the bits: the data (a pool of two batches made once on the GPU by torch.randn: nothing is
    copied from the host, where 13 copies each micro-batch's features and targets on a copy
    stream) and the initial weights (torch's generator, not 13's hash);
  - the hand-overs: PyTorch's own NCCL (its wheel's, its version reported), batched isend/irecv
    on the default process group; 13 sends on two communicators, activations and errors apart.

Exit codes: 0 measured; 1 a run failed, a loss is not finite, or PyTorch is missing; 2 bad usage
(one line); 3 no usable GPU (one line).
"""

import argparse
import json
import os
import statistics
import sys
import time

PROG = "pipe-peer.py"


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad value is one line on stderr and exit code 2 (the course's rule)."""

    def error(self, message):
        sys.stderr.write(f"{PROG}: {message} (try --help)\n")
        sys.exit(2)


def whole(low, high):
    def check(text):
        try:
            value = int(text)
        except ValueError:
            value = None
        if value is None or value < low or value > high:
            raise argparse.ArgumentTypeError(f"expected a whole number from {low} to {high}, got '{text}'")
        return value

    return check


def counts(text):
    """'4,8,16': micro-batch counts, each from 1 to 256."""
    try:
        values = [int(x) for x in text.split(",")]
    except ValueError:
        values = []
    if not values or any(v < 1 or v > 256 for v in values):
        raise argparse.ArgumentTypeError(f"expected counts from 1 to 256 split by commas, got '{text}'")
    return values


def schedules(text):
    names = text.split(",")
    if not names or any(n not in ("gpipe", "1f1b") for n in names):
        raise argparse.ArgumentTypeError(f"expected gpipe, 1f1b or both split by commas, got '{text}'")
    return names


def file_name(text):
    if not text:
        raise argparse.ArgumentTypeError("expected a file's name, got ''")
    return text


def parse_options(argv):
    # the help begins with the tool's name and what it does, as every tool's (tests/tools.bats)
    p = OneLineParser(prog="tools/pipe-peer.py", usage=argparse.SUPPRESS, description=__doc__,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    options = [  # name, range, default, metavar, what it is
        ("--batches", 1, 100000, 12, "N", "batches per run"),
        ("--rounds", 1, 50, 3, "N", "timed rounds"),
        ("--warmup", 0, 10, 1, "N", "untimed rounds first"),
        ("--batch", 1, 65536, 1024, "N", "samples per batch"),
        ("--in", 1, 65536, 256, "N", "inputs"),
        ("--hidden", 1, 65536, 8192, "N", "units per hidden layer"),
        ("--layers", 1, 8, 3, "N", "hidden layers"),
        ("--out", 1, 65536, 16, "N", "outputs"),
    ]
    for name, low, high, default, metavar, words in options:
        dest = "in_dim" if name == "--in" else name[2:]  # `in` is Python's
        p.add_argument(name, dest=dest, type=whole(low, high), default=default, metavar=metavar,
                       help=f"{words} ({low}..{high}, default {default})")
    p.add_argument("--micro-batches", dest="micro_batches", type=counts, default=[4, 8, 16], metavar="M,M",
                   help="micro-batch counts, each dividing --batch (default 4,8,16)")
    p.add_argument("--schedules", type=schedules, default=["1f1b", "gpipe"], metavar="S,S",
                   help="gpipe, 1f1b or both (default 1f1b,gpipe)")
    p.add_argument("--lr", type=float, default=0.02, metavar="X", help="SGD's rate (default 0.02)")
    p.add_argument("--cpu", action="store_true", help="run on the CPU over gloo: a check of the script, not a timing")
    p.add_argument("--json-out", metavar="FILE", type=file_name, help="also write the JSON object to FILE (rank 0)")
    o = p.parse_args(argv)
    for m in o.micro_batches:
        if o.batch % m:
            p.error(f"--micro-batches: {m} does not divide --batch {o.batch}")
    return o


def fail(message, code=1):
    sys.stderr.write(f"{PROG}: {message}\n")
    sys.exit(code)


# ----------------------------------------------------------------------------
# the stage, the data, the step

def stage_layers(weight_layers, rank, world):
    """13's cut (solutions/13_pipeline_parallel/stages.cu): weight layers first..last, from 1."""
    return 1 + rank * weight_layers // world, (rank + 1) * weight_layers // world


def make_stage_module(torch, o, first, last, device):
    dims = [o.in_dim] + [o.hidden] * o.layers + [o.out]
    weight_layers = len(dims) - 1
    modules = []
    for l in range(first, last + 1):
        linear = torch.nn.Linear(dims[l - 1], dims[l])
        torch.nn.init.xavier_uniform_(linear.weight)  # Glorot-uniform, as common/model/mlp.c
        torch.nn.init.zeros_(linear.bias)
        modules.append(linear)
        if l < weight_layers:
            modules.append(torch.nn.ReLU())
    return torch.nn.Sequential(*modules).to(device)


def reset(torch, params, initial):
    with torch.no_grad():
        for p, p0 in zip(params, initial):
            p.copy_(p0)


def nccl_version(torch):
    try:
        v = torch.cuda.nccl.version()
    except Exception:
        return "unknown"
    if isinstance(v, int):
        v = (v // 10000, v // 100 % 100, v % 100) if v >= 10000 else (v // 1000, v // 100 % 10, v % 100)
    return ".".join(str(x) for x in v)


def main(argv):
    o = parse_options(argv)
    os.environ["NCCL_NVLS_ENABLE"] = "0"  # NVLink multicast stays off on the shared machines (tools/launch)
    if "RANK" not in os.environ:
        fail("run under torchrun, one process a stage: torchrun --standalone --nproc-per-node 2 tools/pipe-peer.py", 2)
    try:
        import torch
        import torch.distributed as dist
        from torch.distributed.pipelining import PipelineStage, Schedule1F1B, ScheduleGPipe
    except ImportError as e:
        fail(f"PyTorch (2.4 or later, with torch.distributed.pipelining) is not installed ({e})")
    rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
    local = int(os.environ.get("LOCAL_RANK", "0"))
    weight_layers = o.layers + 1
    if world < 2 or world > weight_layers:
        fail(f"{world} stages for {weight_layers} weight layers: run 2 to {weight_layers} processes", 2)
    if o.cpu:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    else:
        if not torch.cuda.is_available() or local >= torch.cuda.device_count():
            fail(f"no usable GPU for rank {rank}: local rank {local}, {torch.cuda.device_count()} visible", 3)
        torch.backends.cuda.matmul.allow_tf32 = False  # fp32 products, as 13's cublasSgemm
        torch.set_float32_matmul_precision("highest")
        device = torch.device("cuda", local)
        torch.cuda.set_device(device)
        dist.init_process_group("nccl", device_id=device)

    def sync():
        if not o.cpu:
            torch.cuda.synchronize()

    torch.manual_seed(1234 + rank)
    first, last = stage_layers(weight_layers, rank, world)
    module = make_stage_module(torch, o, first, last, device)
    params = list(module.parameters())
    initial = [p.detach().clone() for p in params]
    optimizer = torch.optim.SGD(params, lr=o.lr)
    g = torch.Generator(device=device)
    g.manual_seed(4321)  # every rank the same pool: the first stage reads x, the last t
    data = [(torch.randn(o.batch, o.in_dim, device=device, generator=g),
             torch.randn(o.batch, o.out, device=device, generator=g)) for _ in range(2)]

    def loss_fn(y, t):  # a micro-batch's share: the schedule divides the summed gradients by M
        return (y - t).pow(2).sum() / (2 * t.shape[0])

    runs = {}  # (m, schedule) -> the schedule over a stage of its own (its buffers sized for m)
    for m in o.micro_batches:
        for name in o.schedules:
            stage = PipelineStage(module, rank, world, device)
            kind = ScheduleGPipe if name == "gpipe" else Schedule1F1B
            runs[(m, name)] = kind(stage, n_microbatches=m, loss_fn=loss_fn)
    times = {key: [] for key in runs}
    finite = True
    for r in range(-o.warmup, o.rounds):
        for key, schedule in runs.items():
            reset(torch, params, initial)
            dist.barrier()
            sync()
            t0 = time.perf_counter()
            for i in range(o.batches):
                x, t = data[i % 2]
                optimizer.zero_grad(set_to_none=True)
                losses = []
                if rank == 0:
                    schedule.step(x)
                elif rank == world - 1:
                    schedule.step(target=t, losses=losses)
                else:
                    schedule.step()
                optimizer.step()
            sync()
            ms = (time.perf_counter() - t0) * 1e3 / o.batches
            if rank == world - 1:
                finite = finite and all(bool(torch.isfinite(l).all()) for l in losses)
            if r >= 0:
                times[key].append(ms)
    rows = [None] * world
    dist.all_gather_object(rows, {"times": {f"{m}:{s}": v for (m, s), v in times.items()}, "finite": finite,
                                  "layers": f"{first}-{last}" if first != last else f"{first}",
                                  "device": torch.cuda.get_device_name(device) if not o.cpu else "cpu"})
    dist.barrier()
    dist.destroy_process_group()
    if rank != 0:
        return 0
    finite = all(row["finite"] for row in rows)
    figures = []
    for (m, s) in runs:
        per_stage = [statistics.median(row["times"][f"{m}:{s}"]) for row in rows]
        slowest = max(range(world), key=lambda k: per_stage[k])
        mine = rows[slowest]["times"][f"{m}:{s}"]
        figures.append({"micro_batches": m, "schedule": s, "step_ms": per_stage[slowest],
                        "step_min_ms": min(mine), "step_max_ms": max(mine),
                        "step_ms_per_stage": ",".join(f"{v:.4f}" for v in per_stage)})
    j = {
        "program": PROG, "peer": "torch.distributed.pipelining (PipelineStage, ScheduleGPipe, Schedule1F1B)",
        "torch_version": torch.__version__, "nccl_version": "none (gloo)" if o.cpu else nccl_version(torch),
        "devices": ",".join(row["device"] for row in rows), "stages": world,
        "stage_layers": "|".join(row["layers"] for row in rows), "in": o.in_dim, "hidden": o.hidden,
        "hidden_layers": o.layers, "out": o.out, "batch": o.batch, "dtype": "float32", "tf32": False,
        "lr": o.lr, "batches": o.batches, "rounds": o.rounds, "warmup": o.warmup, "performance": not o.cpu,
        "losses_finite": finite, "figures": figures,
    }
    text = json.dumps(j, indent=1)
    print(text)
    if o.json_out:
        with open(o.json_out, "w") as f:
            f.write(text + "\n")
    if not finite:
        fail("a loss of the last stage is not finite")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
