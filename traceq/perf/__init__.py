"""The per-op performance model: FLOPs and bytes per op, device peaks, the roofline."""
