"""Make the timer samples: a small CPU training loop instrumented with `traceq.timer`.

Writes, next to this script:
  timer_sample.jsonl      traceq's JSONL timer log (regions EPOCH/BATCH/IO/FORWARD/BACKWARD
                          plus a free-form "eval" key)
  timer_sample_stats.txt  Deep500 `save_all_time_stats` text of the same run (CPU and GPU
                          sections; the GPU section is empty on a machine without CUDA)

The loop follows the Deep500 README pattern unchanged (BATCH and IO opened before the loader
yields, complete_all() every 10 batches). Data loading is artificially slow (time.sleep in
the dataset's __getitem__, IO_SLEEP_S per batch), so IO is a visible share of each BATCH —
the data-loading stall the `stalls` analysis should find. The model is a small torch MLP on
the CPU when torch is installed, else the same MLP written with numpy (`--numpy` forces it).

    python sample_traces/make_timer_sample.py [--epochs 2] [--batches 20] [--numpy]
"""
from __future__ import annotations

import argparse
import importlib.util
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))   # run from a checkout without installing

from traceq import timer  # noqa: E402

IO_SLEEP_S = 0.004      # simulated slow storage per batch
BATCH_SIZE = 32
N_IN, N_HIDDEN, N_OUT = 64, 128, 10


class SlowDataset:
    """Random samples; each batch costs IO_SLEEP_S of (simulated) storage latency."""

    def __init__(self, n_batches: int, seed: int = 0):
        import numpy as np

        rng = np.random.default_rng(seed)
        self.x = rng.standard_normal((n_batches, BATCH_SIZE, N_IN)).astype("float32")
        self.y = rng.integers(0, N_OUT, (n_batches, BATCH_SIZE))

    def __len__(self) -> int:
        return len(self.x)

    def __getitem__(self, i):
        time.sleep(IO_SLEEP_S)
        return self.x[i], self.y[i]


def make_torch_step():
    import torch

    torch.manual_seed(0)
    torch.set_num_threads(1)   # a tiny model: extra intra-op threads only add contention
    net = torch.nn.Sequential(torch.nn.Linear(N_IN, N_HIDDEN), torch.nn.ReLU(), torch.nn.Linear(N_HIDDEN, N_OUT))
    criterion = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(net.parameters(), lr=0.05)

    def forward(x, y):
        return criterion(net(torch.from_numpy(x)), torch.from_numpy(y))

    def backward(loss):
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()

    return forward, backward


def make_numpy_step():
    import numpy as np

    rng = np.random.default_rng(0)
    w1 = rng.standard_normal((N_IN, N_HIDDEN)).astype("float32") * 0.1
    w2 = rng.standard_normal((N_HIDDEN, N_OUT)).astype("float32") * 0.1
    cache = {}

    def forward(x, y):
        h = np.maximum(x @ w1, 0)
        z = h @ w2
        z = z - z.max(axis=1, keepdims=True)
        p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
        cache.update(x=x, h=h, p=p, y=y)
        return -np.log(p[np.arange(len(y)), y] + 1e-9).mean()

    def backward(loss):
        x, h, p, y = cache["x"], cache["h"], cache["p"], cache["y"]
        dz = p.copy()
        dz[np.arange(len(y)), y] -= 1
        dz /= len(y)
        dw2 = h.T @ dz
        dh = (dz @ w2.T) * (h > 0)
        dw1 = x.T @ dh
        w1[:] -= 0.05 * dw1
        w2[:] -= 0.05 * dw2

    return forward, backward


def train_epoch(loader, forward, backward, tmr) -> None:
    """The Deep500 README loop, with the batch loop over a plain indexable dataset."""
    tmr.start(timer.TimeType.BATCH, gpu=True)
    tmr.start(timer.TimeType.IO)
    for idx in range(len(loader)):
        inputs, targets = loader[idx]
        tmr.end(timer.TimeType.IO)
        tmr.start(timer.TimeType.FORWARD, gpu=True)
        loss = forward(inputs, targets)
        tmr.end(timer.TimeType.FORWARD, gpu=True)
        tmr.start(timer.TimeType.BACKWARD, gpu=True)
        backward(loss)
        tmr.end(timer.TimeType.BACKWARD, gpu=True)
        tmr.end(timer.TimeType.BATCH, gpu=True)
        if idx % 10 == 0:
            tmr.complete_all()
        if idx != len(loader) - 1:
            tmr.start(timer.TimeType.BATCH, gpu=True)
            tmr.start(timer.TimeType.IO)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--numpy", action="store_true", help="use the numpy model even if torch is installed")
    ap.add_argument("--out", type=Path, default=HERE, help="output folder (default: next to this script)")
    args = ap.parse_args(argv)

    use_torch = not args.numpy and importlib.util.find_spec("torch") is not None
    forward, backward = make_torch_step() if use_torch else make_numpy_step()
    log_path = args.out / "timer_sample.jsonl"
    stats_path = args.out / "timer_sample_stats.txt"
    for p in (log_path, stats_path):
        if p.exists():
            p.unlink()
    os.environ.pop(timer.LOG_ENV, None)

    loader = SlowDataset(args.batches)
    for _ in range(3):                    # warm-up, untimed (first calls allocate and initialise)
        backward(forward(loader.x[0], loader.y[0]))
    tmr = timer.CPUGPUTimer(log=log_path)
    for _ in range(args.epochs):
        tmr.start(timer.TimeType.EPOCH)
        train_epoch(loader, forward, backward, tmr)
        tmr.end(timer.TimeType.EPOCH)
        tmr.start("eval")                 # a free-form key
        forward(loader.x[0], loader.y[0])
        tmr.end("eval")
    tmr.print_all_time_stats()
    tmr.save_all_time_stats(str(stats_path))
    tmr.close()
    print(f"model: {'torch (CPU)' if use_torch else 'numpy'}; wrote {log_path} "
          f"({log_path.stat().st_size} bytes) and {stats_path} ({stats_path.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
