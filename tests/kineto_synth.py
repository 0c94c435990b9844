"""A tiny writer of synthetic Kineto (PyTorch profiler) traces for tests: events in µs, in
the shape torch.profiler writes them (cuda_runtime / kernel / gpu_memcpy / cpu_op /
user_annotation, linked by args.correlation). Tests that use it say which real-trace
situation each synthetic trace reproduces, and derive their expected numbers from the
events they wrote."""
from __future__ import annotations

import gzip
import json
from pathlib import Path

HOST_PID, HOST_TID, GPU_PID, STREAM = 100, 100, 0, 7


class Trace:
    def __init__(self, device: str = "synthetic GPU") -> None:
        self.events: list[dict] = []
        self._corr = 1000
        self.device = device

    def _x(self, cat, name, ts, dur, pid=HOST_PID, tid=HOST_TID, **args):
        ev = {"ph": "X", "cat": cat, "name": name, "pid": pid, "tid": tid, "ts": ts, "dur": dur}
        if args:
            ev["args"] = args
        self.events.append(ev)
        return ev

    def cpu_op(self, name, ts, dur, tid=HOST_TID, **args):
        """A cpu_op; `args` as Kineto writes them ("Input Dims", "External id", ...)."""
        return self._x("cpu_op", name, ts, dur, tid=tid, **args)

    def annotation(self, name, ts, dur, tid=HOST_TID):
        return self._x("user_annotation", name, ts, dur, tid=tid)

    def runtime(self, name, ts, dur, tid=HOST_TID):
        """A CUDA runtime call that launches nothing (cudaFree, cudaDeviceSynchronize, ...)."""
        return self._x("cuda_runtime", name, ts, dur, tid=tid)

    def launch(self, kernel, ts, dur, k_ts, k_dur, api="cudaLaunchKernel", cat="kernel", tid=HOST_TID,
               stream=STREAM):
        """A launch call at [ts, ts+dur] and its GPU op at [k_ts, k_ts+k_dur] (same correlation)
        on `stream`."""
        self._corr += 1
        self._x("cuda_runtime", api, ts, dur, tid=tid, correlation=self._corr)
        self._x(cat, kernel, k_ts, k_dur, pid=GPU_PID, tid=stream, correlation=self._corr, device=0, stream=stream)

    def captured_launch(self, kernel, ts, dur, api="hipLaunchKernel", tid=HOST_TID):
        """A launch call made while a graph is captured: no GPU op runs; ROCm names the
        kernel in the call's args (`kernel`)."""
        self._corr += 1
        named = {} if kernel is None else {"kernel": kernel}   # CUDA's runtime calls name no kernel
        self._x("cuda_runtime", api, ts, dur, tid=tid, correlation=self._corr, **named)

    def graph_launch(self, ts, dur, kernels, api="hipGraphLaunch", tid=HOST_TID):
        """A graph launch call at [ts, ts+dur] and the kernels it replays: (name, k_ts, k_dur)
        each, all with the call's correlation id."""
        self._corr += 1
        self._x("cuda_runtime", api, ts, dur, tid=tid, correlation=self._corr)
        for name, k_ts, k_dur in kernels:
            self._x("kernel", name, k_ts, k_dur, pid=GPU_PID, tid=STREAM, correlation=self._corr, device=0,
                    stream=STREAM)

    def step(self, n, ts, dur):
        return self.annotation(f"ProfilerStep#{n}", ts, dur)

    def gpu_annotation(self, name, ts, dur):
        """The GPU-side copy Kineto writes of an annotation (ProfilerStep#N too): cat
        gpu_user_annotation on the GPU stream (pid = device, tid = stream)."""
        return self._x("gpu_user_annotation", name, ts, dur, pid=GPU_PID, tid=STREAM)

    def memory(self, ts, nbytes, addr, device=0, total_allocated=None, total_reserved=None, tid=HOST_TID,
               device_type=1, cat="cpu_instant_event"):
        """A `[memory]` instant event as torch.profiler(profile_memory=True) writes it: one
        allocation (nbytes > 0) or free (< 0) on device `device` (-1 and device_type 0: the
        CPU); the totals are left out when None (traces before PyTorch 1.10 lack them)."""
        args = {"Device Type": device_type, "Device Id": device, "Addr": addr, "Bytes": nbytes}
        if total_allocated is not None:
            args["Total Allocated"] = total_allocated
        if total_reserved is not None:
            args["Total Reserved"] = total_reserved
        ev = {"ph": "i", "cat": cat, "s": "t", "name": "[memory]", "pid": HOST_PID, "tid": tid, "ts": ts, "args": args}
        if cat is None:
            del ev["cat"]
        self.events.append(ev)
        return ev

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        doc = {"schemaVersion": 1, "deviceProperties": [{"id": 0, "name": self.device}],
               "traceEvents": self.events}
        with gzip.open(path, "wt") as f:
            json.dump(doc, f)
        return path

    # -------------------------------------------------------------- an independent reference
    def gpu_busy(self) -> list[tuple[int, int]]:
        """Union of the GPU op intervals, µs (integers in these tests)."""
        iv = sorted((e["ts"], e["ts"] + e["dur"]) for e in self.events
                    if e.get("cat") in ("kernel", "gpu_memcpy", "gpu_memset"))
        out: list[list[int]] = []
        for s, e in iv:
            if out and s <= out[-1][1]:
                out[-1][1] = max(out[-1][1], e)
            else:
                out.append([s, e])
        return [tuple(x) for x in out]

    def gaps(self, min_gap_us: int = 50) -> list[tuple[int, int]]:
        busy = self.gpu_busy()
        return [(a[1], b[0]) for a, b in zip(busy, busy[1:]) if b[0] - a[1] >= min_gap_us]
