"""Where per-rank tasks run: a local process pool or a Dask distributed cluster.

Ingest and per-rank analyses are a map over ranks; `run_map(fn, items)` runs `fn(item)`
for every item on the chosen executor and returns the results in completion order.
Payloads stay small: an item is a few paths and names, a result is metadata or a small
frame; the heavy data goes from the worker straight to the store's folder (a shared file
system when the workers are on other machines).

- `local`: a `ProcessPoolExecutor` (spawn) with `jobs` processes, or the calling process
  when there is one item or one job.
- `dask`: `distributed.Client` on `--scheduler ADDRESS` / `DASK_SCHEDULER_ADDRESS`, or on a
  scheduler file (`--scheduler-file`, `DASK_SCHEDULER_FILE`), else on a `LocalCluster` of
  `jobs` single-threaded worker processes started for the call. Needs `traceq[dask]`.

The first failing task cancels the others; its exception is raised once every task has
settled, so the caller can discard what the finished ones staged. A Dask task that is
already running cannot be stopped by a cancel (its worker goes on and would write into
the staging area after the caller cleaned it), so on Dask only tasks not yet started are
cancelled and the running ones are waited for and their results discarded.
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Iterable

from .errors import TraceqError

EXECUTORS = ("local", "dask")


@dataclass
class ExecutorSpec:
    """What `--executor`, `--scheduler`, `--scheduler-file` and `--jobs` asked for."""

    kind: str = "local"
    scheduler: str | None = None
    scheduler_file: str | None = None
    jobs: int | None = None


def resolve(kind: str | None = None, scheduler: str | None = None, scheduler_file: str | None = None,
            jobs: int | None = None) -> ExecutorSpec:
    """Options first, then TRACEQ_EXECUTOR / DASK_SCHEDULER_ADDRESS / DASK_SCHEDULER_FILE."""
    kind = (kind or os.environ.get("TRACEQ_EXECUTOR") or "local").strip().lower()
    if kind not in EXECUTORS:
        raise TraceqError(f"--executor {kind!r}: choose local (process pool) or dask (Dask distributed)")
    if kind == "local" and (scheduler or scheduler_file):
        raise TraceqError("--scheduler / --scheduler-file need --executor dask")
    scheduler = scheduler or os.environ.get("DASK_SCHEDULER_ADDRESS") or None
    scheduler_file = scheduler_file or os.environ.get("DASK_SCHEDULER_FILE") or None
    return ExecutorSpec(kind, scheduler, scheduler_file, jobs)


def run_map(fn: Callable[[Any], Any], items: Iterable[Any], spec: ExecutorSpec | None = None,
            on_result: Callable[[Any, Any], None] | None = None) -> list[Any]:
    """`[fn(item) for item in items]` on the executor, in completion order.
    `on_result(item, result)` is called as each task finishes (result None when it failed)."""
    spec = spec or ExecutorSpec()
    items = list(items)
    if not items:
        return []
    if spec.kind == "dask":
        return _dask_map(fn, items, spec, on_result)
    n = min(len(items), spec.jobs or os.cpu_count() or 1)
    if n <= 1:
        out: list[Any] = []
        for item in items:
            try:
                res = fn(item)
            except BaseException as exc:
                exc.traceq_partial = out   # type: ignore[attr-defined]
                raise
            out.append(res)
            if on_result:
                on_result(item, res)
        return out
    # the pool's modules only here: an analysis run in this process never starts one (start-up time)
    from concurrent.futures import ProcessPoolExecutor, as_completed
    from multiprocessing import get_context

    # spawn, not fork: a forked child deadlocks in polars if the parent already used polars
    with ProcessPoolExecutor(n, mp_context=get_context("spawn")) as pool:
        futures = {pool.submit(fn, item): item for item in items}
        return _collect(as_completed(futures), futures, on_result, lambda f: f.cancel())


def _collect(done_iter, futures: dict, on_result, cancel) -> list[Any]:
    out: list[Any] = []
    first_error: BaseException | None = None
    for fut in done_iter:
        res = None
        try:
            res = fut.result()
            out.append(res)
        except Exception as exc:  # noqa: BLE001 - keep draining so every finished task is known
            if first_error is None:
                first_error = exc
                for other in futures:
                    cancel(other)
        if on_result:
            on_result(futures[fut], res)
    if first_error is not None:
        # the results of the tasks that did finish ride on the exception, so that the
        # caller can clean up what they staged
        first_error.traceq_partial = out   # type: ignore[attr-defined]
        raise first_error
    return out


def partial_results(exc: BaseException) -> list:
    return list(getattr(exc, "traceq_partial", []) or [])


def _dask_client(spec: ExecutorSpec):
    try:
        from distributed import Client
    except ImportError:
        raise TraceqError("--executor dask needs Dask distributed: pip install 'traceq[dask]'") from None
    try:
        if spec.scheduler_file:
            return Client(scheduler_file=spec.scheduler_file, timeout="10s"), None
        if spec.scheduler:
            return Client(spec.scheduler, timeout="10s"), None
    except (OSError, TimeoutError) as exc:
        where = spec.scheduler_file or spec.scheduler
        raise TraceqError(f"cannot reach the Dask scheduler at {where} ({exc})") from None
    cluster = local_cluster(spec.jobs or min(os.cpu_count() or 1, 8))
    return Client(cluster), cluster


def local_cluster(n_workers: int):
    """The LocalCluster of a call without a scheduler: `n_workers` single-threaded worker
    processes, everything on the loopback interface. No dashboard: distributed's scheduler
    starts its HTTP server even with dashboard_address=None (on port 8787, with its JSON and
    Prometheus routes); here it has no routes and listens on a free loopback port."""
    import dask
    from distributed import LocalCluster

    with dask.config.set({"distributed.scheduler.http.routes": []}):
        return LocalCluster(n_workers=n_workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                            dashboard_address="127.0.0.1:0", scheduler_kwargs={"dashboard": False},
                            silence_logs=50)


def _cancel_if_waiting(fut) -> None:
    """Cancel a Dask task only while it has not started: a running one finishes, so that
    what it stages is known to the caller and discarded with the rest."""
    if fut.status == "pending" and not _is_processing(fut):
        fut.cancel()


def _is_processing(fut) -> bool:
    try:
        state = fut.client.run_on_scheduler(_task_state, fut.key)
    except Exception:  # noqa: BLE001 - unknown: treat as running (never cancel a running task)
        return True
    return state not in ("released", "waiting", "no-worker", "queued")


def _task_state(key, dask_scheduler=None):
    ts = dask_scheduler.tasks.get(key)
    return None if ts is None else ts.state


def _dask_map(fn, items: list, spec: ExecutorSpec, on_result) -> list[Any]:
    from distributed import as_completed as dask_completed

    client, cluster = _dask_client(spec)
    try:
        futures = {client.submit(fn, item, pure=False, key=f"traceq-{i}-{os.urandom(4).hex()}"): item
                   for i, item in enumerate(items)}
        return _collect(dask_completed(list(futures)), futures, on_result, _cancel_if_waiting)
    finally:
        client.close()
        if cluster is not None:
            cluster.close()
