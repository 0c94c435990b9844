"""Kernel names: identity (the function a kernel is), library (who wrote it), tensor cores (whether it ran on them)."""
