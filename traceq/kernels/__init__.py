"""Kernel names: identity (the function a kernel is) and library (who wrote it)."""
