"""Experiment parameters from file names, and experiment trees grouped into runs.

Extra-Deep / Extra-P naming (the default): the path below the experiment folder, with
`/` read as `.`, is a dot-separated list of tokens after the trace suffix is removed:

    <app>.<param><value>[.<param><value>...].r<rep>.mpi<rank>     e.g. cifar10.p8.b64.r2.mpi3.sqlite

- `mpi<N>` (also `rank<N>`) is the rank; it does not name the run;
- `r<N>` is the repetition (label `rep`), never a rank, also in a file name inside a
  configuration folder (`mm.x10/r2.sqlite`: run `mm.x10.r2`, rank 0);
- `<letters><number>` is a parameter (label `<letters>` = number), also several glued
  together as Extra-P allows (`x1y2z3`);
- the first token, when more follow, is the application (label `app`), as is any token
  that is not a parameter; a name of one token is parameters only with two or more pairs.

A user pattern (`--name-pattern`) is a Python regular expression with named groups searched
in the file name: group `rank` is the rank, group `run` the run name, every other group a
label. Without a `run` group the run name is the file name without its trace suffix and
without the text the `rank` group matched (and the separator before it).

All files with the same run name (one configuration and repetition) are the ranks of one run.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from ..errors import TraceqError

TRACE_SUFFIXES = (".pt.trace.json.gz", ".pt.trace.json", ".json.gz", ".json", ".sqlite", ".db", ".jsonl",
                  ".txt", ".gz", ".nsys-rep.sqlite")
_RANK_TOKEN = re.compile(r"(?:mpi|rank)(\d+)", re.I)
_REP_TOKEN = re.compile(r"r(\d+)", re.I)
_PARAM_PAIR = re.compile(r"([A-Za-z_]+)(\d+(?:,\d+)?)")


@dataclass
class FileParams:
    path: Path
    run: str
    labels: dict[str, str] = field(default_factory=dict)
    rank: int | None = None


def strip_suffix(name: str) -> str:
    for suffix in sorted(TRACE_SUFFIXES, key=len, reverse=True):
        if name.endswith(suffix) and len(name) > len(suffix):
            return name[: -len(suffix)]
    return name


def _number(text: str) -> str:
    return text.replace(",", ".")


def _parse_tokens(tokens: list[str], labels: dict[str, str], app: list[str], kept: list[str]) -> int | None:
    rank = None
    for n, tok in enumerate(tokens):
        if m := _RANK_TOKEN.fullmatch(tok):
            rank = int(m.group(1))
            continue
        kept.append(tok)
        if n == 0 and (len(tokens) > 1 or len(_PARAM_PAIR.findall(tok)) < 2):
            app.append(tok)   # [PREFIX "."] PARAMETER-VALUE-PAIRS; a lone `resnet50` is a name, `x1y2` not
        elif m := _REP_TOKEN.fullmatch(tok):
            labels["rep"] = m.group(1)
        elif re.fullmatch(r"(?:[A-Za-z_]+\d+(?:,\d+)?)+", tok):
            for name, value in _PARAM_PAIR.findall(tok):
                labels[name] = _number(value)
        else:
            app.append(tok)
    return rank


def parse_extradeep(relpath: str) -> FileParams | None:
    """Parameters from an Extra-Deep/Extra-P style path; None when no token is a parameter.

    Parameters in a folder name (Extra-P's Nsight layout `mm.x10y1.r1/profile0.sqlite`) make
    the files in it the ranks of that run (rank from the file name's number)."""
    parts = [p for p in re.split(r"[/\\]", relpath) if p]
    labels: dict[str, str] = {}
    app: list[str] = []
    kept: list[str] = []
    rank = None
    for d in parts[:-1]:
        r = _parse_tokens([t for t in d.split(".") if t], labels, app, kept)
        rank = r if r is not None else rank
    if any(k != "rep" for k in labels):     # the folder names the configuration
        tokens = [t for t in strip_suffix(parts[-1]).split(".") if t]
        for tok in tokens:                  # `mm.x10/r2.mpi1.sqlite`: r<N> is the repetition, never a rank
            if m := _REP_TOKEN.fullmatch(tok):
                labels["rep"] = m.group(1)
                kept.append(tok)
        m = re.search(r"(\d+)$", ".".join(t for t in tokens if not _REP_TOKEN.fullmatch(t)))
        r = _RANK_TOKEN.search(parts[-1])
        rank = int(r.group(1)) if r else int(m.group(1)) if m else rank
    else:
        labels, app, kept = {}, [], []
        rank = _parse_tokens([t for t in strip_suffix(parts[-1]).split(".") if t], labels, app, kept)
    if not any(k != "rep" for k in labels):
        return None
    if app:
        labels["app"] = ".".join(app)
    return FileParams(Path(relpath), ".".join(kept), labels, rank)


def compile_pattern(pattern: str) -> re.Pattern:
    try:
        rx = re.compile(pattern)
    except re.error as exc:
        raise TraceqError(f"--name-pattern {pattern!r}: not a valid regular expression ({exc})") from None
    if not rx.groupindex:
        raise TraceqError(f"--name-pattern {pattern!r}: needs named groups, e.g. (?P<ranks>\\d+)")
    return rx


def parse_pattern(rx: re.Pattern, name: str) -> FileParams | None:
    stem = strip_suffix(name)
    m = rx.search(stem)
    if not m:
        return None
    groups = {k: v for k, v in m.groupdict().items() if v is not None}
    rank = int(groups.pop("rank")) if "rank" in groups and groups["rank"].isdigit() else None
    run = groups.pop("run", None)
    if run is None:
        run = stem
        if m.groupdict().get("rank") is not None:
            s, e = m.span("rank")
            while s > 0 and not stem[s - 1].isalnum():   # the separator before it
                s -= 1
            while s > 0 and stem[s - 1].isalpha():       # the word that names it (rank, mpi)
                s -= 1
            while s > 0 and not stem[s - 1].isalnum():
                s -= 1
            run = stem[:s] + stem[e:]
    return FileParams(Path(name), run or stem, groups, rank)


def _is_trace(p: Path) -> bool:
    return p.is_file() and not p.name.startswith(".") and p.name.endswith(TRACE_SUFFIXES)


def plan_tree(root: str | Path, pattern: str | None = None) -> list[FileParams]:
    """Every trace file under `root` (recursively) with its run name, labels and rank.

    A file whose name the pattern does not match belongs to the run named after its folder
    (relative to `root`), as a plain directory ingest would do.
    """
    root = Path(root)
    if not root.is_dir():
        raise TraceqError("--recursive needs a directory", root)
    rx = compile_pattern(pattern) if pattern else None
    out = []
    for path in sorted(p for p in root.rglob("*") if _is_trace(p)):
        rel = path.relative_to(root).as_posix()
        fp = parse_pattern(rx, path.name) if rx else parse_extradeep(rel)
        if fp is None:
            parent = path.parent.relative_to(root).as_posix()
            run = strip_suffix(path.name) if parent == "." else parent.replace("/", ".")
            fp = FileParams(path, run, {}, None)
        fp.path = path
        out.append(fp)
    if not out:
        raise TraceqError("no trace files (*.json[.gz], *.sqlite, *.jsonl, *.txt) below this folder", root)
    return out
