"""Readers for benchmark result files that carry metrics rather than events.

mila training benchmarks (mila-iqia/training): one JSON object per run, e.g.

    {"name": "resnet50", "batch_size": 64, ...,
     "train":      {"avg": 0.125, "count": 100, "max": .., "min": .., "sd": .., "unit": "s"},
     "train_item": {"avg": 512.0, "count": 100, "max": .., "min": .., "sd": .., "unit": "items/s"}}

Every member that is an object with `avg` and `unit` becomes a metric of that name;
`train` is also stored as `step_time` (batch time, s) and `train_item` as `throughput`
(items/s). `name` becomes the label `bench`, `batch_size` the label `batch`.

milabench summary (`milabench summary RUNS -o summary.json`): one object per benchmark,

    {"<bench>": {"name": .., "n": 4, "successes": 4, "failures": 0,
                 "train_rate": {"min", "max", "mean", "std", "sem", "median"}, "walltime": 312.5}}

Each benchmark gives `throughput` (= train_rate mean, items/s, sd = std, runs = n) and
`walltime` (s) rows with `bench` set: the summary already aggregates its n runs.

Hostile input: invalid UTF-8 is replaced by U+FFFD (counted in a warning), JSON nested
deeper than 64 levels is refused before it is decoded, numbers that are not finite (or
counts beyond int64) are null.
"""
from __future__ import annotations

import math
from pathlib import Path

import pyarrow as pa

from ...errors import BadInput
from ..common import Parsed, read_bytes
from ..safe_text import TooDeep, check_utf8, clean_text, loads_capped, repair_utf8
from ...schema import METRICS

ALIASES = {"train": "step_time", "train_item": "throughput"}


def _f(v):
    try:
        x = float(v)
    except (TypeError, ValueError):
        return None
    return x if math.isfinite(x) else None


def _i(v):
    x = _f(v)
    return int(x) if x is not None and -2.0**63 <= x < 2.0**63 else None


def _training(doc: dict) -> tuple[list[dict], dict[str, str]]:
    rows = []
    for key, val in doc.items():
        if isinstance(val, dict) and "avg" in val and "unit" in val:
            row = {"bench": None, "value": _f(val.get("avg")), "unit": str(val.get("unit")),
                   "samples": _i(val.get("count")), "sd": _f(val.get("sd")), "min": _f(val.get("min")),
                   "max": _f(val.get("max")), "runs": 1}
            if row["value"] is None:
                continue
            rows.append({**row, "metric": key})
            if key in ALIASES:
                rows.append({**row, "metric": ALIASES[key]})
    labels = {}
    if isinstance(doc.get("name"), str):
        labels["bench"] = doc["name"]
    if _i(doc.get("batch_size")) is not None:
        labels["batch"] = str(_i(doc["batch_size"]))
    return rows, labels


def _summary(doc: dict) -> list[dict]:
    rows = []
    for bench, val in doc.items():
        if not isinstance(val, dict):
            continue
        rate = val.get("train_rate")
        n = _i(val.get("n")) or _i(val.get("successes"))
        if isinstance(rate, dict) and _f(rate.get("mean")) is not None:
            rows.append({"bench": str(bench), "metric": "throughput", "value": _f(rate["mean"]), "unit": "items/s",
                         "samples": n, "sd": _f(rate.get("std")), "min": _f(rate.get("min")),
                         "max": _f(rate.get("max")), "runs": n or 1})
        if _f(val.get("walltime")) is not None:
            rows.append({"bench": str(bench), "metric": "walltime", "value": _f(val["walltime"]), "unit": "s",
                         "samples": n, "sd": None, "min": None, "max": None, "runs": n or 1})
    return rows


def read(path: str | Path) -> Parsed:
    raw, n_replaced = repair_utf8(read_bytes(Path(path)))
    try:
        doc = loads_capped(raw)
    except TooDeep as exc:
        raise BadInput(f"not a mila/milabench result file ({exc})", path) from None
    except ValueError as exc:
        raise BadInput(f"not a mila/milabench result file ({str(exc)[:200]})", path) from None
    if not isinstance(doc, dict):
        raise BadInput("not a mila/milabench result file (expected a JSON object)", path)
    rows, labels = _training(doc)
    fmt = "mila"
    if not rows:
        rows, labels, fmt = _summary(doc), {}, "milabench"
    if not rows:
        raise BadInput("no metrics found (expected mila 'train': {avg, unit, ...} members or milabench "
                       "'<bench>': {train_rate: {mean, ...}} entries)", path)
    rows = [{k: clean_text(v) if isinstance(v, str) else v for k, v in r.items()} for r in rows]
    labels = {k: clean_text(v) for k, v in labels.items()}
    table = pa.Table.from_pylist(rows, schema=METRICS)
    check_utf8(table, f"{path}: metrics")
    warnings = [f"{n_replaced} invalid UTF-8 sequence(s) replaced by U+FFFD"] if n_replaced else []
    return Parsed(tables={"metrics": table}, format=fmt, labels=labels, warnings=warnings)
