"""The per-op performance model: FLOPs and minimal bytes per op (cost.py, ops.toml), device peaks (devices.py, traceq/rules/gpus.toml)."""
