"""GPU timing for `CPUGPUTimer`: CUDA events through torch (`GPUBackend`), or "not available"
with the reason (no torch, no CUDA, a failed initialisation), which is never a crash.

torch is imported when the first `gpu=True` region starts, not before. Events are recorded on
the current stream and reused from a pool that grows as needed; reading a duration
synchronises on the end event only.
"""
from __future__ import annotations

from typing import Any


class GPUBackend:
    """CUDA events through torch, or 'not available' (record() -> None, no times)."""

    def __init__(self) -> None:
        self.available = False
        self.reason = ""
        self.info: dict[str, Any] = {}
        self._free: list = []
        self._event = None
        try:
            import torch
        except ImportError:
            self.reason = "torch is not installed"
            return
        except Exception as exc:  # a broken install must not crash the training
            self.reason = f"torch cannot be imported ({type(exc).__name__}: {exc})"
            return
        try:
            if not torch.cuda.is_available() or torch.cuda.device_count() < 1:
                self.reason = "CUDA is not available"
                return
            torch.cuda.init()
            dev = torch.cuda.current_device()
            props = torch.cuda.get_device_properties(dev)
            self.info = {"device_index": int(dev), "device_name": str(props.name),
                         "sm_count": int(props.multi_processor_count),
                         "memory_bytes": int(props.total_memory)}
        except Exception as exc:
            self.reason = f"CUDA initialisation failed ({type(exc).__name__}: {exc})"
            return
        self._event = torch.cuda.Event
        self.available = True

    def record(self):
        """A CUDA event recorded now on the current stream, or None when not available."""
        if not self.available:
            return None
        ev = self._free.pop() if self._free else self._event(enable_timing=True)
        ev.record()
        return ev

    def elapsed_ns(self, start, end) -> int | None:
        """The ns between two recorded events (waits for `end`; both go back to the pool),
        None when either is None."""
        if start is None or end is None:
            return None
        end.synchronize()
        ns = round(start.elapsed_time(end) * 1e6)   # ms -> ns
        self._free.append(start)
        self._free.append(end)
        return ns
