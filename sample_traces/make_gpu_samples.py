"""Record the real GPU sample traces in sample_traces/gpu/ (torch.profiler on one CUDA GPU).

Each scenario is a small, deterministic workload whose bound is known by construction, so
that the critical path (`traceq critical-path`) and diagnose can be checked on real GPU
traces, not only on hand-made ones:

  train_slow_loader/   CNN training; a DataLoader (num_workers=0) whose samples sleep:
                       waiting for data bounds every step (data_loading).
  train_gpu_bound/     bf16 MLP with 8192-wide layers, batch already on the GPU, no
                       per-step sync: the GPU's kernels bound the step (gpu).
  train_small_sync/    a tiny MLP, batch 8, `loss.item()` every step: the host (Python,
                       dispatch, launches) bounds the step, with a sync per step (cpu/launch).
  two_streams/         matmuls on two streams joined by CUDA events (cudaStreamWaitEvent)
                       and a cudaStreamSynchronize per step (cross-stream and sync edges).
  infer_cuda_graph/    inference: a model captured once in a CUDA graph, replayed per
                       request, output copied to the host (graph replays, D2H sync).
  ddp_gloo_straggler/  DDP, 2 ranks on the one GPU over gloo (NCCL refuses two ranks on one
                       device); rank 1 sleeps 20 ms per step before its forward, so rank 0
                       waits for it in the gradient all-reduce (cross-rank wait).

Every trace has record_shapes=True and profile_memory=True, ProfilerStep#N steps
(schedule wait=1, warmup=1, active=4). The traceName is cut to the file name (no absolute
paths) and files are gzipped with mtime=0. Run on a machine with one CUDA GPU:

    python sample_traces/make_gpu_samples.py --out-dir sample_traces/gpu [--only NAME]
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import sys
import time
import traceback
from pathlib import Path

import torch
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile, record_function, schedule

SEED = 1234
ACTIVE = 4
TOTAL = 2 + ACTIVE  # wait=1, warmup=1, active=ACTIVE


def _profiler(tmp: Path):
    def on_ready(prof) -> None:
        prof.export_chrome_trace(str(tmp))
    return profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA],
                   schedule=schedule(wait=1, warmup=1, active=ACTIVE, repeat=1),
                   on_trace_ready=on_ready, record_shapes=True, profile_memory=True,
                   with_stack=False)


def _finish(tmp: Path, out: Path) -> None:
    data = tmp.read_bytes()
    data = data.replace(b'"traceName": ' + json.dumps(str(tmp)).encode(),
                        b'"traceName": ' + json.dumps(out.name).encode())
    out.parent.mkdir(parents=True, exist_ok=True)
    with open(out, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
            gz.write(data)
    tmp.unlink()


def _tmp(out: Path) -> Path:
    return Path("/tmp") / (out.parent.name + "_" + out.name + ".tmp.json")


class SmallCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.net = nn.Sequential(
            nn.Conv2d(3, 64, 3, padding=1), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(64, 128, 3, padding=1), nn.BatchNorm2d(128), nn.ReLU(), nn.MaxPool2d(2),
            nn.Flatten(), nn.Linear(128 * 16 * 16, 256), nn.ReLU(), nn.Linear(256, 10))

    def forward(self, x):
        return self.net(x)


class SleepyDataset(torch.utils.data.Dataset):
    def __init__(self, n: int, sleep_s: float) -> None:
        g = torch.Generator().manual_seed(SEED)
        self.x = torch.randn(n, 3, 64, 64, generator=g)
        self.y = torch.randint(0, 10, (n,), generator=g)
        self.sleep_s = sleep_s

    def __len__(self):
        return len(self.x)

    def __getitem__(self, i):
        time.sleep(self.sleep_s)
        return self.x[i], self.y[i]


def train_slow_loader(out: Path) -> None:
    batch = 64
    loader = torch.utils.data.DataLoader(SleepyDataset(batch * TOTAL, 0.0005), batch_size=batch,
                                         num_workers=0, pin_memory=True)
    model = SmallCNN().cuda()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    tmp = _tmp(out)
    with _profiler(tmp) as prof:
        for x, y in loader:
            x, y = x.cuda(non_blocking=True), y.cuda(non_blocking=True)
            with record_function("forward"):
                loss = loss_fn(model(x), y)
            with record_function("backward"):
                loss.backward()
            with record_function("optimizer"):
                opt.step()
                opt.zero_grad(set_to_none=True)
            prof.step()
    torch.cuda.synchronize()
    _finish(tmp, out)


def train_gpu_bound(out: Path) -> None:
    width, batch, layers = 8192, 8192, 4
    model = nn.Sequential(*[m for _ in range(layers) for m in (nn.Linear(width, width), nn.GELU())])
    model = model.cuda().to(torch.bfloat16)
    opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=True)
    g = torch.Generator(device="cuda").manual_seed(SEED)
    x = torch.randn(batch, width, device="cuda", dtype=torch.bfloat16, generator=g)
    for _ in range(2):  # warm cuBLAS outside the profile
        model(x).float().pow(2).mean().backward()
    opt.zero_grad(set_to_none=True)
    torch.cuda.synchronize()
    tmp = _tmp(out)
    with _profiler(tmp) as prof:
        for _ in range(TOTAL):
            with record_function("forward"):
                loss = model(x).float().pow(2).mean()
            with record_function("backward"):
                loss.backward()
            with record_function("optimizer"):
                opt.step()
                opt.zero_grad(set_to_none=True)
            prof.step()
        torch.cuda.synchronize()
    _finish(tmp, out)


def train_small_sync(out: Path) -> None:
    model = nn.Sequential(nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(),
                          nn.Linear(64, 10)).cuda()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)  # foreach, not fused
    loss_fn = nn.CrossEntropyLoss()
    g = torch.Generator(device="cuda").manual_seed(SEED)
    xs = torch.randn(TOTAL, 8, 64, device="cuda", generator=g)
    ys = torch.randint(0, 10, (TOTAL, 8), device="cuda", generator=g)
    losses = []
    tmp = _tmp(out)
    with _profiler(tmp) as prof:
        for i in range(TOTAL):
            with record_function("forward"):
                loss = loss_fn(model(xs[i]), ys[i])
            with record_function("backward"):
                loss.backward()
            with record_function("optimizer"):
                opt.step()
                opt.zero_grad(set_to_none=False)
            losses.append(loss.item())  # a sync per step, as logging loops do
            prof.step()
    _finish(tmp, out)


def two_streams(out: Path) -> None:
    n = 4096
    g = torch.Generator(device="cuda").manual_seed(SEED)
    a = torch.randn(n, n, device="cuda", dtype=torch.bfloat16, generator=g)
    b = torch.randn(n, n, device="cuda", dtype=torch.bfloat16, generator=g)
    side = torch.cuda.Stream()
    main = torch.cuda.current_stream()
    torch.cuda.synchronize()
    tmp = _tmp(out)
    with _profiler(tmp) as prof:
        for _ in range(TOTAL):
            with record_function("produce"):
                c = a @ b
                ready = torch.cuda.Event()
                ready.record(main)
            with torch.cuda.stream(side):
                side.wait_event(ready)           # cudaStreamWaitEvent: side waits for main
                with record_function("side_work"):
                    d = c @ b
                    for _ in range(3):
                        d = d @ b
                done = torch.cuda.Event()
                done.record(side)
            with record_function("main_work"):
                e = c @ a
            main.wait_event(done)                # main waits for side
            with record_function("join"):
                f = (d + e).sum()
            main.synchronize()                   # cudaStreamSynchronize
            prof.step()
    _finish(tmp, out)


def infer_cuda_graph(out: Path) -> None:
    width = 2048
    model = nn.Sequential(*[m for _ in range(8) for m in (nn.Linear(width, width), nn.GELU())])
    model = model.cuda().to(torch.float16).eval()
    static_in = torch.zeros(64, width, device="cuda", dtype=torch.float16)
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.inference_mode():
        with torch.cuda.stream(s):
            for _ in range(3):
                model(static_in)
        torch.cuda.current_stream().wait_stream(s)
        graph = torch.cuda.CUDAGraph()
        with torch.cuda.graph(graph):
            static_out = model(static_in)
    g = torch.Generator().manual_seed(SEED)
    requests = [torch.randn(64, width, generator=g).half().pin_memory() for _ in range(TOTAL)]
    results = []
    tmp = _tmp(out)
    with torch.inference_mode(), _profiler(tmp) as prof:
        for req in requests:
            with record_function("request"):
                static_in.copy_(req, non_blocking=True)
                graph.replay()
                results.append(static_out.float().argmax(dim=1).cpu())  # D2H: waits
            prof.step()
    _finish(tmp, out)


def _ddp_worker(rank: int, world: int, out_dir: str, port: int) -> None:
    import torch.distributed as dist
    from torch.nn.parallel import DistributedDataParallel as DDP
    os.environ["MASTER_ADDR"] = "127.0.0.1"
    os.environ["MASTER_PORT"] = str(port)
    dist.init_process_group("gloo", rank=rank, world_size=world)
    torch.manual_seed(SEED)
    model = SmallCNN().cuda()
    ddp = DDP(model, device_ids=[0])
    opt = torch.optim.SGD(ddp.parameters(), lr=0.01)
    loss_fn = nn.CrossEntropyLoss()
    g = torch.Generator(device="cuda").manual_seed(SEED + rank)
    xs = torch.randn(TOTAL, 32, 3, 64, 64, device="cuda", generator=g)
    ys = torch.randint(0, 10, (TOTAL, 32), device="cuda", generator=g)
    out = Path(out_dir) / "ddp_gloo_straggler" / f"rank{rank}.pt.trace.json.gz"
    tmp = _tmp(out)
    dist.barrier()
    with _profiler(tmp) as prof:
        for i in range(TOTAL):
            if rank == 1:
                with record_function("slow_input"):
                    time.sleep(0.020)  # the straggler
            with record_function("forward"):
                loss = loss_fn(ddp(xs[i]), ys[i])
            with record_function("backward"):
                loss.backward()
            with record_function("optimizer"):
                opt.step()
                opt.zero_grad(set_to_none=True)
            prof.step()
        torch.cuda.synchronize()
    _finish(tmp, out)
    dist.barrier()
    dist.destroy_process_group()


def ddp_gloo_straggler(out_dir: Path) -> None:
    import torch.multiprocessing as mp
    mp.spawn(_ddp_worker, args=(2, str(out_dir), 29533), nprocs=2, join=True)


SCENARIOS = {
    "train_slow_loader": train_slow_loader,
    "train_gpu_bound": train_gpu_bound,
    "train_small_sync": train_small_sync,
    "two_streams": two_streams,
    "infer_cuda_graph": infer_cuda_graph,
    "ddp_gloo_straggler": None,
}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", type=Path, default=Path(__file__).resolve().parent / "gpu")
    ap.add_argument("--only", action="append", choices=sorted(SCENARIOS))
    args = ap.parse_args()
    if not torch.cuda.is_available():
        print("no CUDA GPU: these samples must be recorded on one", file=sys.stderr)
        return 2
    torch.manual_seed(SEED)
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name(0)}")
    failed = 0
    for name in args.only or list(SCENARIOS):
        t0 = time.perf_counter()
        try:
            if name == "ddp_gloo_straggler":
                ddp_gloo_straggler(args.out_dir)
            else:
                SCENARIOS[name](args.out_dir / name / "rank0.pt.trace.json.gz")
            files = sorted((args.out_dir / name).glob("*.json.gz"))
            sizes = ", ".join(f"{p.name} {p.stat().st_size / 1024:.0f} KiB" for p in files)
            print(f"{name}: ok in {time.perf_counter() - t0:.1f} s: {sizes}", flush=True)
        except Exception:  # noqa: BLE001 - report and go on with the next scenario
            failed += 1
            print(f"{name}: FAILED", flush=True)
            traceback.print_exc()
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
