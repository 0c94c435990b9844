"""Make the small PyTorch (Kineto) sample traces in sample_traces/.

Profiles a tiny CNN training loop on the CPU with torch.profiler and writes gzipped
Chrome traces:

  sample_traces/slow_dataloader/rank0.pt.trace.json.gz
      torch DataLoader (num_workers=0) over a Dataset whose __getitem__ sleeps a few ms
      per sample, so waiting for data is most of every step (a data-loading stall).
  sample_traces/fast_dataloader/rank0.pt.trace.json.gz
      the same model and batch size with the batches already in memory (data wait is
      a tiny share of each step).

Each step has `record_function` regions "forward", "backward" and "optimizer", and the
optimizer zeroes gradients with `zero_grad(set_to_none=False)` so the zero-fill appears.
Seeds, one intra-op thread and fixed shapes keep the model and the op sequence the same
on every run (durations naturally vary).

    pip install torch==2.13.0        # the local CPU build; other specs pull CUDA wheels
    python sample_traces/make_torch_samples.py [--steps 6] [--sleep-ms 3]
"""
from __future__ import annotations

import argparse
import gzip
import json
import os
import time
from pathlib import Path

import torch
import torch.nn as nn
from torch.profiler import ProfilerActivity, profile, record_function, schedule
from torch.utils.data import DataLoader, Dataset

HERE = Path(__file__).resolve().parent
EXPECTED_TORCH = "2.13.0"
SEED = 1234
BATCH = 32
SHAPE = (3, 32, 32)
CLASSES = 10


class TinyCNN(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        )
        self.head = nn.Sequential(nn.Flatten(), nn.Linear(32 * 8 * 8, 64), nn.ReLU(),
                                  nn.Linear(64, CLASSES))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x))


def make_data(n: int) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(SEED)
    return torch.randn(n, *SHAPE, generator=g), torch.randint(0, CLASSES, (n,), generator=g)


class SlowDataset(Dataset):
    """Per-sample dataset that 'reads and decodes' each sample (a sleep)."""

    def __init__(self, n: int, sleep_s: float) -> None:
        self.x, self.y = make_data(n)
        self.sleep_s = sleep_s

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i: int):
        time.sleep(self.sleep_s)
        return self.x[i], self.y[i]


class InMemoryBatches(Dataset):
    """Pre-collated batches held in memory: fetching one is a list index."""

    def __init__(self, n_batches: int) -> None:
        x, y = make_data(n_batches * BATCH)
        self.batches = [(x[i * BATCH:(i + 1) * BATCH].contiguous(),
                         y[i * BATCH:(i + 1) * BATCH].contiguous()) for i in range(n_batches)]

    def __len__(self) -> int:
        return len(self.batches)

    def __getitem__(self, i: int):
        return self.batches[i]


def train(loader: DataLoader, out: Path, active: int) -> None:
    torch.manual_seed(SEED)
    model = TinyCNN()
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    loss_fn = nn.CrossEntropyLoss()
    model.train()
    total = 2 + active  # wait=1, warmup=1, active=N
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = out.with_name(out.name + ".tmp.json")

    def on_ready(prof) -> None:
        prof.export_chrome_trace(str(tmp))

    with profile(activities=[ProfilerActivity.CPU],
                 schedule=schedule(wait=1, warmup=1, active=active, repeat=1),
                 on_trace_ready=on_ready, record_shapes=False) as prof:
        it = iter(loader)
        for _ in range(total):
            x, y = next(it)
            with record_function("forward"):
                loss = loss_fn(model(x), y)
            with record_function("backward"):
                loss.backward()
            with record_function("optimizer"):
                opt.step()
                opt.zero_grad(set_to_none=False)
            prof.step()
    # torch records the export path as "traceName": keep just the final file name (no
    # absolute paths in committed samples), byte for byte otherwise. Gzip with mtime=0.
    data = tmp.read_bytes()
    data = data.replace(b'"traceName": ' + json.dumps(str(tmp)).encode(),
                        b'"traceName": ' + json.dumps(out.name).encode())
    with open(out, "wb") as raw:
        with gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as gz:
            gz.write(data)
    tmp.unlink()


def describe(path: Path) -> dict:
    """Step count, mean step time and DataLoader-wait share, read back from the trace."""
    trace = json.loads(gzip.decompress(path.read_bytes()))
    ev = [e for e in trace["traceEvents"] if e.get("ph") == "X"]
    steps = [e for e in ev if str(e.get("name", "")).startswith("ProfilerStep#")]
    dl = [e for e in ev if str(e.get("name", "")).startswith("enumerate(DataLoader)")]
    step_us = sum(float(e["dur"]) for e in steps)
    dl_us = 0.0
    for s in steps:  # DataLoader spans inside each step
        a, b = float(s["ts"]), float(s["ts"]) + float(s["dur"])
        dl_us += sum(float(d["dur"]) for d in dl if a <= float(d["ts"]) < b)
    return {"events": len(trace["traceEvents"]), "steps": len(steps),
            "mean_step_ms": step_us / max(len(steps), 1) / 1000,
            "data_wait_pct": 100 * dl_us / step_us if step_us else 0.0,
            "kib": path.stat().st_size / 1024}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out-dir", type=Path, default=HERE)
    ap.add_argument("--steps", type=int, default=6, help="active (recorded) steps")
    ap.add_argument("--sleep-ms", type=float, default=3.0, help="per-sample sleep, slow case")
    args = ap.parse_args()
    if not torch.__version__.startswith(EXPECTED_TORCH):
        print(f"note: torch {torch.__version__} (samples were made with {EXPECTED_TORCH})")

    torch.manual_seed(SEED)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
    n_batches = 2 + args.steps

    slow = DataLoader(SlowDataset(n_batches * BATCH, args.sleep_ms / 1000), batch_size=BATCH,
                      shuffle=False, num_workers=0)
    fast = DataLoader(InMemoryBatches(n_batches), batch_size=None, shuffle=False,
                      num_workers=0)
    outs = {
        "slow_dataloader": args.out_dir / "slow_dataloader" / "rank0.pt.trace.json.gz",
        "fast_dataloader": args.out_dir / "fast_dataloader" / "rank0.pt.trace.json.gz",
    }
    train(slow, outs["slow_dataloader"], args.steps)
    train(fast, outs["fast_dataloader"], args.steps)
    print(f"torch {torch.__version__}, {args.steps} active steps, batch {BATCH}, "
          f"slow case sleeps {args.sleep_ms} ms per sample")
    for name, p in outs.items():
        d = describe(p)
        print(f"  {p.relative_to(args.out_dir.parent) if p.is_relative_to(args.out_dir.parent) else p}: "
              f"{d['kib']:.0f} KiB gz, {d['events']} events, {d['steps']} ProfilerSteps, "
              f"mean step {d['mean_step_ms']:.1f} ms, DataLoader wait {d['data_wait_pct']:.1f}% of step")


if __name__ == "__main__":
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    main()
