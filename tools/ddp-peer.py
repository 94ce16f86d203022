#!/usr/bin/env python3
"""ddp-peer.py: lesson 12's training step as PyTorch's DistributedDataParallel runs it, timed.

The peer that lesson 12's figures are set beside (issue 37): the same model, batch, buckets and
precision, trained by torch.nn.parallel.DistributedDataParallel on the same GPUs, in the same run
as 12 (tools/levers, tools/multi-gpu-figures). Python because the peer is PyTorch itself: a C copy
of DDP would measure the copy. Nothing in the course depends on it.

usage: torchrun --standalone --nproc-per-node 2 tools/ddp-peer.py [options]     two GPUs
       python3 tools/ddp-peer.py [options]                                       one GPU, one rank

Round-robin, --warmup untimed rounds then --rounds timed ones, each round three runs of --batches
batches from the same initial weights:
  sync    DDP's step: forward, backward with each bucket all-reduced as soon as it is ready, update;
  nosync  the same step inside ddp.no_sync(): no communication at all, the compute alone;
  one     rank 0 alone, the model without DDP on its GPU (the other ranks wait): 12's one-rank run.
A run's step is its wall time over its batches, the GPU synchronised before and after (12's harness
times a run the same way). Rank 0 prints one JSON object on stdout: every rank's median step and its
spread (min and max over the rounds) per mode, the step of the slowest rank, weak scaling (one /
sync), exposed communication (sync - nosync, and sync - one as 12's figures take it), DDP's buckets,
and whether every rank ended a synced run with the same weights (bit for bit).

What matches lesson 12 (common/model/mlp.h, common/model/model.h, solutions/12_data_parallel_overlap):
  - the model: --in inputs, --layers hidden layers of --hidden units, --out outputs, ReLU after every
    layer but the last, Glorot-uniform weights and zero biases; 12's GPU-bound shape by default
    (tools/bench's 12r1/12r2: --hidden 4096 --layers 4, 512 samples a rank);
  - the loss, sum |y - t|^2 / (2 x samples of the rank), its mean over the ranks (DDP averages the
    gradients; 12 sums them and divides the rate); plain SGD at --lr 0.02;
  - fp32 throughout, TF32 off (12's cublasSgemm never uses it), no bf16, no AMP;
  - buckets of --bucket-mib 25 MiB, last layer first: DDP's are [b5 W5 b4 W4] [b3 W3] [b2 W2] [b1 W1]
    on the default shape, 12's plan 5-4|3|2|1 (DDP's first bucket closes at 1 MiB, 12's at 25: on
    this shape both close at the 64 MiB W4).
What cannot match:
  - the bits: the data (12's synthetic teacher, common/model/data.h, hashed per sample) and the initial
    weights (12's hash, not torch's generator) differ; the data here is a pool of two batches made
    once on the GPU (torch.randn), so DDP's step copies nothing from the host where 12 copies each
    batch on a copy stream beside its step (0.5 MiB a batch: far under a step);
  - the order of the work: a bucket is ready in DDP once autograd has run the layer's whole
    backward (12's --ready-after layer, where 12's default starts it after the weight gradients);
    DDP all-reduces in place in its bucket buffers (copies in and out), 12 from the gradients into a
    buffer of sums; SGD's update is one multi-tensor kernel here, one per bucket in 12;
  - NCCL: PyTorch's own (its wheel's), not the one make found; its version is reported.

Exit codes: 0 measured; 1 a run failed or the ranks' weights differ after a synced run, or PyTorch
is missing; 2 bad usage (one line); 3 no usable GPU (one line).
"""

import argparse
import json
import os
import socket
import statistics
import sys
import time

PROG = "ddp-peer.py"


class OneLineParser(argparse.ArgumentParser):
    """argparse, but a bad value is one line on stderr and exit code 2 (the course's rule)."""

    def error(self, message):
        sys.stderr.write(f"{PROG}: {message} (try --help)\n")
        sys.exit(2)


def positive(low, high):
    def check(text):
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number from {low} to {high}, got '{text}'")
        if value < low or value > high:
            raise argparse.ArgumentTypeError(f"expected a whole number from {low} to {high}, got '{text}'")
        return value

    return check


def file_name(text):
    if not text:
        raise argparse.ArgumentTypeError("expected a file's name, got ''")
    return text


def plain(x):
    """0.000001, not 1e-06: the course writes every number in digits."""
    return f"{x:.6f}".rstrip("0").rstrip(".")


def real(low, high):
    def check(text):
        words = f"expected a number from {plain(low)} to {plain(high)}, got '{text}'"
        try:
            value = float(text)
        except ValueError:
            raise argparse.ArgumentTypeError(words)
        if not (low <= value <= high):  # NaN fails too
            raise argparse.ArgumentTypeError(words)
        return value

    return check


def parse_options(argv):
    # the help begins with the tool's name and what it does, as every tool's (tests/tools.bats)
    p = OneLineParser(prog="tools/ddp-peer.py", usage=argparse.SUPPRESS, description=__doc__,
                      formatter_class=argparse.RawDescriptionHelpFormatter)
    options = [  # name, whole number or not, range, default, metavar, what it is
        ("--batches", int, 1, 100000, 60, "N", "batches per run"),
        ("--rounds", int, 1, 50, 3, "N", "timed rounds"),
        ("--warmup", int, 0, 10, 1, "N", "untimed rounds first"),
        ("--shard", int, 1, 65536, 512, "N", "samples per rank"),
        ("--in", int, 1, 65536, 256, "N", "inputs"),
        ("--hidden", int, 1, 65536, 4096, "N", "units per hidden layer"),
        ("--layers", int, 1, 8, 4, "N", "hidden layers"),
        ("--out", int, 1, 65536, 16, "N", "outputs"),
        ("--bucket-mib", float, 0.001, 4096, 25.0, "MIB", "DDP's bucket_cap_mb"),
        ("--lr", float, 0.000001, 10, 0.02, "X", "SGD's rate"),
    ]
    for name, kind, low, high, default, metavar, words in options:
        dest = "in_dim" if name == "--in" else name[2:].replace("-", "_")  # `in` is Python's
        check = positive(low, high) if kind is int else real(low, high)
        words = f"{words} ({plain(low)}..{plain(high)}, default {plain(default)})"  # the help says the real default
        p.add_argument(name, dest=dest, type=check, default=default, metavar=metavar, help=words)
    p.add_argument("--json-out", metavar="FILE", type=file_name, help="also write the JSON object to FILE (rank 0)")
    return p.parse_args(argv)


# ----------------------------------------------------------------------------
# the ranks

def placement():
    """(rank, world, local rank) from torchrun's environment; one rank when started alone."""
    if "RANK" not in os.environ:
        with socket.socket() as s:  # a free port for the one-rank process group
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        os.environ.update(RANK="0", WORLD_SIZE="1", LOCAL_RANK="0", MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    return int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"]), int(os.environ.get("LOCAL_RANK", "0"))


def fail(message, code=1):
    sys.stderr.write(f"{PROG}: {message}\n")
    sys.exit(code)


# ----------------------------------------------------------------------------
# the model, the data, the step

def make_model(torch, o, device):
    layers = []
    dims = [o.in_dim] + [o.hidden] * o.layers + [o.out]
    for k in range(len(dims) - 1):
        linear = torch.nn.Linear(dims[k], dims[k + 1])
        torch.nn.init.xavier_uniform_(linear.weight)  # Glorot-uniform, as common/model/mlp.c
        torch.nn.init.zeros_(linear.bias)
        layers.append(linear)
        if k < len(dims) - 2:
            layers.append(torch.nn.ReLU())
    return torch.nn.Sequential(*layers).to(device)


def make_data(torch, o, device, rank):
    g = torch.Generator(device=device)
    g.manual_seed(1234 + rank)
    return [(torch.randn(o.shard, o.in_dim, device=device, generator=g),
             torch.randn(o.shard, o.out, device=device, generator=g)) for _ in range(2)]


def step(torch, model, optimizer, batch, shard, quiet=None):
    x, t = batch
    optimizer.zero_grad(set_to_none=True)
    y = model(x)
    loss = (y - t).pow(2).sum() / (2 * shard)  # 12's loss: the mean over this rank's samples
    if quiet is None:
        loss.backward()
    else:
        with quiet():  # ddp.no_sync(): the gradients stay on this rank, nothing is all-reduced
            loss.backward()
    optimizer.step()


def timed_run(torch, model, optimizer, data, o, quiet=None):
    """ms per batch of one run of --batches batches, the GPU idle before and after."""
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(o.batches):
        step(torch, model, optimizer, data[i % len(data)], o.shard, quiet)
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) * 1e3 / o.batches


def reset(torch, params, initial):
    with torch.no_grad():
        for p, p0 in zip(params, initial):
            p.copy_(p0)


def weights_digest(torch, params):
    """A checksum of the weights' bits, the same on every rank after a synced run: their bit
    patterns summed, plainly and weighted by position, in 64-bit integers (wrapping, so in any
    order the same), on the GPU (no copy of the model to the host, no numpy)."""
    bits = torch.cat([p.detach().reshape(-1).view(torch.int32) for p in params]).to(torch.int64)
    weight = torch.arange(bits.numel(), device=bits.device, dtype=torch.int64) % 65521 + 1
    plain, weighted = int(bits.sum()), int((bits * weight).sum())
    return f"{plain & 0xFFFFFFFF:08x}{weighted & 0xFFFFFFFF:08x}"


# ----------------------------------------------------------------------------
# the report

def spread(values):
    return statistics.median(values), min(values), max(values)


def per_rank(rows, k):
    return ",".join(f"{r[k]:.4f}" for r in rows)


def nccl_version(torch):
    """"2.27.5": PyTorch's own NCCL (a tuple in recent versions, one number 22705 in older ones)."""
    try:
        v = torch.cuda.nccl.version()
    except Exception:
        return "unknown"
    if isinstance(v, int):
        v = (v // 10000, v // 100 % 100, v % 100) if v >= 10000 else (v // 1000, v // 100 % 10, v % 100)
    return ".".join(str(x) for x in v)


def report(torch, dist, o, world, rank, times, digests, ddp):
    rows = [None] * world
    dist.all_gather_object(rows, {"sync": spread(times["sync"]), "nosync": spread(times["nosync"]),
                                  "one": spread(times["one"]) if times["one"] else None,
                                  "digest": digests, "device": torch.cuda.get_device_name()})
    if rank != 0:
        return None
    sync = max(r["sync"][0] for r in rows)  # a synchronised step goes at the pace of the slowest rank
    nosync = max(r["nosync"][0] for r in rows)
    one = rows[0]["one"]
    identical = all(r["digest"] == rows[0]["digest"] for r in rows)
    buckets = None
    try:  # DDP's own account of its buckets (an internal call: absent in some versions)
        logged = ddp._get_ddp_logging_data()
        buckets = str(logged.get("bucket_sizes"))
    except Exception:
        pass
    nccl = nccl_version(torch)
    j = {
        "program": PROG, "peer": "torch.nn.parallel.DistributedDataParallel", "torch_version": torch.__version__,
        "nccl_version": nccl, "devices": ",".join(r["device"] for r in rows), "world_size": world,
        "launcher": "torchrun" if os.environ.get("TORCHELASTIC_RUN_ID") else "none",
        "in": o.in_dim, "hidden": o.hidden, "hidden_layers": o.layers, "out": o.out, "shard_batch": o.shard,
        "global_batch": o.shard * world, "bucket_cap_mb": o.bucket_mib, "ddp_bucket_sizes": buckets,
        "dtype": "float32", "tf32": False, "lr": o.lr, "batches": o.batches, "rounds": o.rounds, "warmup": o.warmup,
        "sync_step_ms": sync, "nosync_step_ms": nosync,
        "one_step_ms": one[0], "one_step_min_ms": one[1], "one_step_max_ms": one[2],
        "sync_step_ms_per_rank": per_rank([r["sync"] for r in rows], 0),
        "sync_step_min_ms_per_rank": per_rank([r["sync"] for r in rows], 1),
        "sync_step_max_ms_per_rank": per_rank([r["sync"] for r in rows], 2),
        "nosync_step_ms_per_rank": per_rank([r["nosync"] for r in rows], 0),
        "nosync_step_min_ms_per_rank": per_rank([r["nosync"] for r in rows], 1),
        "nosync_step_max_ms_per_rank": per_rank([r["nosync"] for r in rows], 2),
        "scaling": one[0] / sync,
        "exposed_comm_ms": sync - nosync, "exposed_comm_share": (sync - nosync) / sync,
        "exposed_vs_one_ms": sync - one[0],
        "exposed_comm_ms_per_rank": ",".join(f"{r['sync'][0] - r['nosync'][0]:.4f}" for r in rows),
        "weights_checksums": ",".join(r["digest"] for r in rows), "ranks_identical": identical,
    }
    return j


# ----------------------------------------------------------------------------

def main(argv):
    o = parse_options(argv)
    os.environ["NCCL_NVLS_ENABLE"] = "0"  # NVLink multicast stays off on the shared machines (tools/launch)
    try:
        import torch
        import torch.distributed as dist
    except ImportError as e:
        fail(f"PyTorch is not installed ({e}): the peer needs torch and torchrun (pip install torch)")
    rank, world, local = placement()
    if not torch.cuda.is_available() or torch.cuda.device_count() == 0:
        fail("no usable GPU (torch.cuda.is_available() is false)", 3)
    if local >= torch.cuda.device_count():
        fail(f"no usable GPU for rank {rank}: local rank {local}, {torch.cuda.device_count()} visible", 3)
    torch.backends.cuda.matmul.allow_tf32 = False  # fp32 products, as 12's cublasSgemm
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    device = torch.device("cuda", local)
    torch.cuda.set_device(device)
    try:  # device_id (PyTorch 2.3 and later) binds the communicator to this rank's GPU at once
        dist.init_process_group("nccl", device_id=device)
    except TypeError:
        dist.init_process_group("nccl")
    torch.manual_seed(1234)  # every rank the same weights; DDP broadcasts rank 0's anyway
    model = make_model(torch, o, device)
    ddp = torch.nn.parallel.DistributedDataParallel(model, device_ids=[local], bucket_cap_mb=o.bucket_mib)
    params = list(ddp.module.parameters())
    initial = [p.detach().clone() for p in params]  # every run starts from these (12's harness does too)
    data = make_data(torch, o, device, rank)
    optimizer = torch.optim.SGD(params, lr=o.lr)
    # the one-rank run: a model of its own, never wrapped (DDP's hooks are on `model`'s parameters)
    plain = make_model(torch, o, device) if rank == 0 else None
    plain_params = list(plain.parameters()) if plain else []
    plain_optimizer = torch.optim.SGD(plain_params, lr=o.lr) if plain else None
    times = {"sync": [], "nosync": [], "one": []}
    digests = None
    for r in range(-o.warmup, o.rounds):
        for mode in ("sync", "nosync", "one"):
            reset(torch, plain_params if mode == "one" else params, initial)
            dist.barrier()  # every rank starts the run together, as 12's runs line up
            if mode == "one":  # rank 0 alone: the model without DDP, the others wait
                ms = timed_run(torch, plain, plain_optimizer, data, o) if rank == 0 else None
            else:
                ms = timed_run(torch, ddp, optimizer, data, o, ddp.no_sync if mode == "nosync" else None)
            if mode == "sync":
                digests = weights_digest(torch, params)
            if r >= 0 and ms is not None:
                times[mode].append(ms)
    dist.barrier()
    j = report(torch, dist, o, world, rank, times, digests, ddp)
    dist.destroy_process_group()
    if j is None:
        return 0
    text = json.dumps(j, indent=1)
    print(text)
    if o.json_out:
        with open(o.json_out, "w") as f:
            f.write(text + "\n")
    if not j["ranks_identical"]:
        fail("the ranks' weights differ after a synced run: " + j["weights_checksums"])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
