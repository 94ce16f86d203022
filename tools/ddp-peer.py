#!/usr/bin/env python3
"""ddp-peer.py: lesson 12's training step as PyTorch's DistributedDataParallel runs it, timed.

The peer that lesson 12's figures are set beside (issue 37): the same model, batch, buckets and
precision, trained by torch.nn.parallel.DistributedDataParallel on the same GPUs, in the same run
as 12 (tools/levers, tools/multi-gpu-figures). Python because the peer is PyTorch itself: a C copy
of DDP would measure the copy. Nothing in the course depends on it.

usage: torchrun --standalone --nproc-per-node 2 tools/ddp-peer.py [options]     two GPUs
       python3 tools/ddp-peer.py [options]                                       one GPU, one rank

Round-robin, --warmup untimed rounds then --rounds timed ones, each round runs of --batches batches
from the same initial weights: one, then for every variant (--variants) sync and nosync:
  sync    DDP's step: forward, backward with each bucket all-reduced as soon as it is ready, update;
  nosync  the same step inside ddp.no_sync(): no communication at all, the compute alone;
  one     rank 0 alone, the model without DDP on its GPU (the other ranks wait): 12's one-rank run.
A variant is DDP as its users tune it (issue 46), a model of its own under DDP with some of:
gradient_as_bucket_view=True (view: the gradients are the buckets, no copy in or out),
static_graph=True (static), SGD's step fused, foreach or a loop, and another bucket_cap_mb. The
JSON's top level holds the first variant's figures; "variants" holds every one. --trace-out runs
each mode once more under torch.profiler and says where rank 0's step goes (GPU busy and idle,
kernels by kind). --cpu runs on the CPU over gloo: a check of the script, no timing.
A run's step is its wall time over its batches, the GPU synchronised before and after (12's harness
times a run the same way). Rank 0 prints one JSON object on stdout: every rank's median step and its
spread (min and max over the rounds) per mode, the step of the slowest rank, weak scaling (one /
sync), exposed communication (sync - nosync, and sync - one as 12's figures take it), DDP's buckets,
and whether every rank ended a synced run with the same weights (bit for bit) and a no_sync run with
weights of its own (its data differ: alike, the run communicated, and the script fails).

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
import contextlib
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
    p.add_argument("--variants", type=variant_list, default=[("default", {})], metavar="V;V",
                   help="DDP's settings to time, round-robin, each a row: words joined by '+' from view "
                   "(gradient_as_bucket_view=True), static (static_graph=True), foreach, fused or loop (SGD's "
                   "step: multi-tensor, fused, or a loop over the tensors; default: PyTorch's choice), "
                   "bucket=MIB (bucket_cap_mb; default --bucket-mib), and default (none); split by ';' "
                   "(default: default)")
    p.add_argument("--trace-out", metavar="FILE", type=file_name,
                   help="after the rounds, one more run of each mode under torch.profiler on every rank (the "
                   "first variant): rank 0's GPU time per step by kind of kernel, its busy and idle time, into "
                   "the JSON (trace), and rank 0's Chrome trace into FILE")
    p.add_argument("--cpu", action="store_true", help="run on the CPU over gloo: a check of the script, not a timing")
    p.add_argument("--json-out", metavar="FILE", type=file_name, help="also write the JSON object to FILE (rank 0)")
    return p.parse_args(argv)


VARIANT_WORDS = ("default", "view", "static", "foreach", "fused", "loop")


def variant_list(text):
    """'default;view+static+fused;view+bucket=100': [(name, settings)], each name once."""
    out, seen = [], set()
    for name in text.split(";"):
        settings = {}
        for word in name.split("+"):
            if word.startswith("bucket="):
                try:
                    settings["bucket"] = real(0.001, 4096)(word[7:])
                except argparse.ArgumentTypeError as e:
                    raise argparse.ArgumentTypeError(f"variant '{name}': bucket= {e}")
            elif word in VARIANT_WORDS:
                if word in ("foreach", "fused", "loop"):
                    if "optimizer" in settings:
                        raise argparse.ArgumentTypeError(f"variant '{name}': one of foreach, fused, loop")
                    settings["optimizer"] = word
                elif word != "default":
                    settings[word] = True
            else:
                raise argparse.ArgumentTypeError(
                    f"variant '{name}': '{word}' is none of {', '.join(VARIANT_WORDS)} or bucket=MIB")
        if name in seen:
            raise argparse.ArgumentTypeError(f"variant '{name}' given twice")
        seen.add(name)
        out.append((name, settings))
    return out


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
    # ddp.no_sync() must hold the forward pass too: DDP's forward is where it prepares the reducer for
    # the backward pass (require_backward_grad_sync); a backward alone inside it still all-reduces
    with quiet() if quiet is not None else contextlib.nullcontext():
        y = model(x)
        loss = (y - t).pow(2).sum() / (2 * shard)  # 12's loss: the mean over this rank's samples
        loss.backward()
    optimizer.step()


def timed_run(torch, model, optimizer, data, o, quiet=None):
    """ms per batch of one run of --batches batches, the GPU idle before and after."""
    if not o.cpu:
        torch.cuda.synchronize()
    t0 = time.perf_counter()
    for i in range(o.batches):
        step(torch, model, optimizer, data[i % len(data)], o.shard, quiet)
    if not o.cpu:
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


def variant_figures(rows, name, one):
    """One variant's figures from every rank's medians (rank 0 only)."""
    sync = max(r[name]["sync"][0] for r in rows)  # a synchronised step goes at the pace of the slowest rank
    nosync = max(r[name]["nosync"][0] for r in rows)
    return {
        "sync_step_ms": sync, "nosync_step_ms": nosync,
        "sync_step_ms_per_rank": per_rank([r[name]["sync"] for r in rows], 0),
        "sync_step_min_ms_per_rank": per_rank([r[name]["sync"] for r in rows], 1),
        "sync_step_max_ms_per_rank": per_rank([r[name]["sync"] for r in rows], 2),
        "nosync_step_ms_per_rank": per_rank([r[name]["nosync"] for r in rows], 0),
        "nosync_step_min_ms_per_rank": per_rank([r[name]["nosync"] for r in rows], 1),
        "nosync_step_max_ms_per_rank": per_rank([r[name]["nosync"] for r in rows], 2),
        "scaling": one / sync,
        "exposed_comm_ms": sync - nosync, "exposed_comm_share": (sync - nosync) / sync,
        "exposed_vs_one_ms": sync - one, "nosync_vs_one_ms": nosync - one,
        "exposed_comm_ms_per_rank": ",".join(f"{r[name]['sync'][0] - r[name]['nosync'][0]:.4f}" for r in rows),
        "weights_checksums": ",".join(r[name]["digest"] for r in rows),
        "ranks_identical": all(r[name]["digest"] == rows[0][name]["digest"] for r in rows),
        "nosync_ranks_identical": all(r[name]["nosync_digest"] == rows[0][name]["nosync_digest"] for r in rows),
    }


def report(torch, dist, o, world, rank, runs, times, one_times, trace):
    mine = {"one": spread(one_times) if one_times else None, "device": "cpu" if o.cpu else torch.cuda.get_device_name()}
    for v in runs:
        mine[v["name"]] = {"sync": spread(times[v["name"]]["sync"]), "nosync": spread(times[v["name"]]["nosync"]),
                           "digest": v["digest"], "nosync_digest": v["nosync_digest"]}
    rows = [None] * world
    dist.all_gather_object(rows, mine)
    if rank != 0:
        return None
    one = rows[0]["one"]
    variants = []
    for v in runs:
        buckets = None
        try:  # DDP's own account of its buckets (an internal call: absent in some versions)
            buckets = str(v["ddp"]._get_ddp_logging_data().get("bucket_sizes"))
        except Exception:
            pass
        f = {"name": v["name"], "gradient_as_bucket_view": v["view"], "static_graph": v["static"],
             "optimizer": v["optimizer"], "bucket_cap_mb": v["bucket"], "ddp_bucket_sizes": buckets}
        f.update(variant_figures(rows, v["name"], one[0]))
        variants.append(f)
    first = variants[0]
    j = {
        "program": PROG, "peer": "torch.nn.parallel.DistributedDataParallel", "torch_version": torch.__version__,
        "nccl_version": "none (gloo)" if o.cpu else nccl_version(torch), "devices": ",".join(r["device"] for r in rows), "world_size": world,
        "launcher": "torchrun" if os.environ.get("TORCHELASTIC_RUN_ID") else "none",
        "in": o.in_dim, "hidden": o.hidden, "hidden_layers": o.layers, "out": o.out, "shard_batch": o.shard,
        "global_batch": o.shard * world, "bucket_cap_mb": first["bucket_cap_mb"],
        "ddp_bucket_sizes": first["ddp_bucket_sizes"], "dtype": "float32", "tf32": False, "lr": o.lr,
        "batches": o.batches, "rounds": o.rounds, "warmup": o.warmup, "variant": first["name"],
        "one_step_ms": one[0], "one_step_min_ms": one[1], "one_step_max_ms": one[2],
    }
    # the first variant's figures at the top (tools/levers and tools/multi-gpu-figures read them), then all
    j.update({k: v for k, v in first.items() if k not in j and k != "name"})
    j["ranks_identical"] = all(v["ranks_identical"] for v in variants)
    j["variants"] = variants
    if trace is not None:
        j["trace"] = trace
    return j


# ----------------------------------------------------------------------------
# the trace: where a step's time goes on rank 0

def kernel_kind(name):
    n = name.lower()
    if "nccl" in n:
        return "nccl"
    if "gemm" in n or "xmma" in n or "cutlass" in n or "cublas" in n or "sm90" in n:
        return "gemm"
    if "memcpy" in n or "memset" in n or "copy" in n or "cat" in n:
        return "copy"
    return "elementwise"


def summarise_trace(prof, batches):
    """GPU time per step by kind of kernel on rank 0, the union of every kernel's time (busy), and
    the span from the first kernel to the last (window): window - busy is the GPU idle in a step."""
    spans, kinds, names, count = [], {}, {}, 0
    for e in prof.events():
        if str(getattr(e, "device_type", "")).endswith("CUDA") and e.time_range.end > e.time_range.start:
            spans.append((e.time_range.start, e.time_range.end))
            ms = (e.time_range.end - e.time_range.start) / 1e3
            k = kernel_kind(e.name)
            kinds[k] = kinds.get(k, 0.0) + ms
            n = names.setdefault(e.name[:80], [0.0, 0])
            n[0] += ms
            n[1] += 1
            count += 1
    if not spans:
        return {"kernels_per_step": 0}
    spans.sort()
    busy, at = 0.0, spans[0][0]
    for a, b in spans:
        a = max(a, at)
        if b > a:
            busy += b - a
            at = b
    window = (spans[-1][1] - spans[0][0]) / 1e3
    out = {"kernels_per_step": count / batches, "window_ms_per_step": window / batches,
           "busy_ms_per_step": busy / 1e3 / batches, "idle_ms_per_step": (window - busy / 1e3) / batches}
    out.update({f"{k}_ms_per_step": v / batches for k, v in sorted(kinds.items())})
    top = sorted(names.items(), key=lambda kv: -kv[1][0])[:8]  # the kernels that take the most time
    out["top_kernels"] = [{"name": n, "ms_per_step": v[0] / batches, "per_step": v[1] / batches} for n, v in top]
    return out


def traced_runs(torch, dist, o, rank, v, plain, plain_optimizer, data, initial):
    """One run of each mode under torch.profiler (every rank profiles, so that the ranks stay alike);
    rank 0's summary per mode, and its Chrome trace of each run into --trace-out with the mode's name
    before the suffix (t.json: t.sync.json, t.nosync.json, t.one.json)."""
    from torch.profiler import ProfilerActivity, profile
    activities = [ProfilerActivity.CPU] + ([] if o.cpu else [ProfilerActivity.CUDA])
    base, dot, suffix = o.trace_out.rpartition(".")
    out = {"variant": v["name"], "files": []}
    for mode in ("sync", "nosync", "one"):
        reset(torch, list(plain.parameters()) if mode == "one" and plain else v["params"], initial)
        dist.barrier()
        with profile(activities=activities) as prof:
            if mode != "one":
                timed_run(torch, v["ddp"], v["optimizer_obj"], data, o, v["ddp"].no_sync if mode == "nosync" else None)
            elif rank == 0:
                timed_run(torch, plain, plain_optimizer, data, o)
        if rank == 0:
            out[mode] = summarise_trace(prof, o.batches)
            name = f"{base}.{mode}.{suffix}" if dot else f"{o.trace_out}.{mode}"
            prof.export_chrome_trace(name)
            out["files"].append(name)
    return out if rank == 0 else None


# ----------------------------------------------------------------------------

def make_variant(torch, o, device, local, name, settings):
    """A model of its own under DDP with the variant's settings, and its optimizer."""
    model = make_model(torch, o, device)
    bucket = settings.get("bucket", o.bucket_mib)
    ddp = torch.nn.parallel.DistributedDataParallel(
        model, device_ids=None if o.cpu else [local], bucket_cap_mb=bucket,
        gradient_as_bucket_view=settings.get("view", False), static_graph=settings.get("static", False))
    params = list(ddp.module.parameters())
    choice = settings.get("optimizer")
    kwargs = {"foreach": {"foreach": True}, "fused": {"fused": True}, "loop": {"foreach": False}}.get(choice, {})
    return {"name": name, "ddp": ddp, "params": params, "optimizer_obj": torch.optim.SGD(params, lr=o.lr, **kwargs),
            "view": settings.get("view", False), "static": settings.get("static", False),
            "optimizer": choice or "default", "bucket": bucket, "digest": None, "nosync_digest": None}


def main(argv):
    o = parse_options(argv)
    os.environ["NCCL_NVLS_ENABLE"] = "0"  # NVLink multicast stays off on the shared machines (tools/launch)
    try:
        import torch
        import torch.distributed as dist
    except ImportError as e:
        fail(f"PyTorch is not installed ({e}): the peer needs torch and torchrun (pip install torch)")
    rank, world, local = placement()
    if o.cpu:
        device = torch.device("cpu")
        dist.init_process_group("gloo")
    else:
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
    runs = []
    for name, settings in o.variants:
        torch.manual_seed(1234)  # every variant the same initial weights too
        runs.append(make_variant(torch, o, device, local, name, settings))
    initial = [p.detach().clone() for p in runs[0]["params"]]  # every run starts from these (as 12's harness)
    data = make_data(torch, o, device, rank)
    # the one-rank run: a model of its own, never wrapped (DDP's hooks are on the wrapped models' parameters)
    plain = make_model(torch, o, device) if rank == 0 else None
    plain_params = list(plain.parameters()) if plain else []
    plain_optimizer = torch.optim.SGD(plain_params, lr=o.lr) if plain else None
    times = {v["name"]: {"sync": [], "nosync": []} for v in runs}
    one_times = []
    for r in range(-o.warmup, o.rounds):
        reset(torch, plain_params, initial)
        dist.barrier()  # rank 0 alone: the model without DDP, the others wait
        ms = timed_run(torch, plain, plain_optimizer, data, o) if rank == 0 else None
        if r >= 0 and ms is not None:
            one_times.append(ms)
        for v in runs:  # round-robin: every variant in every round
            for mode in ("sync", "nosync"):
                reset(torch, v["params"], initial)
                dist.barrier()  # every rank starts the run together, as 12's runs line up
                ms = timed_run(torch, v["ddp"], v["optimizer_obj"], data, o,
                               v["ddp"].no_sync if mode == "nosync" else None)
                # after a synced run every rank holds the same weights; after a no_sync run each its own
                # (the ranks' data differ): were they alike, no_sync would not have held the step
                v["digest" if mode == "sync" else "nosync_digest"] = weights_digest(torch, v["params"])
                if r >= 0:
                    times[v["name"]][mode].append(ms)
    trace = None
    if o.trace_out:
        trace = traced_runs(torch, dist, o, rank, runs[0], plain, plain_optimizer, data, initial)
    dist.barrier()
    j = report(torch, dist, o, world, rank, runs, times, one_times, trace)
    dist.destroy_process_group()
    if j is None:
        return 0
    text = json.dumps(j, indent=1)
    print(text)
    if o.json_out:
        with open(o.json_out, "w") as f:
            f.write(text + "\n")
    alike = [v["name"] for v in j["variants"] if v["nosync_ranks_identical"] and world > 1]
    if alike:
        fail("the ranks' weights are alike after a no_sync run, their data differing: no_sync still communicated "
             f"({', '.join(alike)})")
    if not j["ranks_identical"]:
        fail("the ranks' weights differ after a synced run: " +
             "; ".join(f"{v['name']}: {v['weights_checksums']}" for v in j["variants"] if not v["ranks_identical"]))
    return 0


if __name__ == "__main__":
    code = main(sys.argv[1:])
    sys.stdout.flush()
    sys.stderr.flush()
    # after a profiled run on the CPU (--cpu --trace-out), a thread of gloo or of the profiler aborts at
    # the interpreter's teardown now and then ("terminate called without an active exception"), the
    # work done and written: end here, as the JSON says
    os._exit(code)
