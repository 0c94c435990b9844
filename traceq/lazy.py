"""Libraries imported on first use. An analysis module is imported whenever the registry is
built (`traceq --help` too), so it names polars through `polars` below: the library loads
when an analysis first touches it, not when its declaration is read."""
from __future__ import annotations

import importlib


class LazyModule:
    """Stands for the module `name`; the first attribute read imports it."""

    def __init__(self, name: str) -> None:
        self.__dict__["module_name"] = name

    def __getattr__(self, attr: str):
        return getattr(importlib.import_module(self.__dict__["module_name"]), attr)

    def __repr__(self) -> str:
        return f"<lazy module {self.__dict__['module_name']!r}>"


polars = LazyModule("polars")
pyarrow = LazyModule("pyarrow")
