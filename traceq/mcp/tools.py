"""The tools of `traceq mcp`, as plain dicts (name, description, JSON Schema of the input), and
`call(store, name, arguments)` -> [text, ...]. Nothing here imports the MCP SDK.

Every registered analysis (traceq.analyses.registry.REGISTRY) is a tool of the same name, its
input the analysis' declared parameters (traceq.analyses.spec.Param: type, default, minimum,
choices, help: what drives `--help`) and the scope options its command takes (run, rank,
steps, step_pattern, skip_first; run_a and run_b for an analysis of two runs). Left out: the
executor's options (a tool runs in this process; no scheduler address from a model) and every
parameter that names a file (metavar FILE, DIR or PATH: an analysis that needs one, `check`,
has no tool). Its result is the analysis' JSON document, the bytes `traceq <name> -f json`
prints, then `{"limits": ...}` (traceq.mcp.facts.limits).

The other tools: list_runs, describe_store, sql (strict, capped) and explain.
"""
from __future__ import annotations

import json

from ..analyses.spec import EXECUTOR_OPTIONS, Analysis, Param
from ..errors import TraceqError
from .facts import description

PATH_METAVARS = ("FILE", "DIR", "PATH")
JSON_TYPES = {str: "string", int: "integer", float: "number", bool: "boolean"}

SQL_ROWS, SQL_ROWS_MAX = 200, 5000          # rows the sql tool returns by default, at most
SQL_BYTES = 256 * 1024                      # bytes of JSON rows, at most
SQL_SECONDS = 20.0                          # DuckDB is interrupted after this long

SCOPE_PROPS = {
    "run": {"type": "string", "description": "Run to analyse (default: the most recently ingested; list_runs names them)."},
    "rank": {"type": "integer", "minimum": 0, "description": "One rank (default: every rank of the run)."},
    "steps": {"type": "string", "description": "Steps A to B, both included, by the step numbers the tables show, e.g. 5:10, 7, 5:."},
    "step_pattern": {"type": "string", "description": "Steps are the regions whose name matches this regex."},
    "skip_first": {"type": "integer", "minimum": 0, "default": 0, "description": "Leave out the first N steps of each rank (warm-up)."},
}


class ToolError(Exception):
    """A call the tool refuses (bad arguments, an unknown run, a refused statement): one line."""


def is_path(p: Param) -> bool:
    return any(w in (p.metavar or "").upper() for w in PATH_METAVARS)


def offered(spec: Analysis) -> list[Param]:
    """The parameters of `spec` a tool takes (module docstring), in declaration order."""
    return [p for p in spec.params if p.name not in EXECUTOR_OPTIONS and not is_path(p)]


def has_tool(spec: Analysis) -> bool:
    return not any(p.required and is_path(p) for p in spec.params)


def param_schema(p: Param) -> dict:
    item = {"type": JSON_TYPES.get(p.type, "string")}
    if p.choices:
        item["enum"] = list(p.choices)
    if p.min is not None:
        item["minimum"] = p.min
    out = {"type": "array", "items": item} if p.multiple else dict(item)
    if p.default is not None:
        out["default"] = list(p.default) if p.multiple and isinstance(p.default, (list, tuple)) else p.default
    out["description"] = p.help
    return out


def analysis_tool(spec: Analysis) -> dict:
    props: dict = {}
    required: list[str] = []
    if spec.runs == 2:
        props["run_a"] = {"type": "string", "description": "Baseline run (A)."}
        props["run_b"] = {"type": "string", "description": "Run compared with it (B)."}
        required += ["run_a", "run_b"]
    if spec.scope != "store":
        if spec.runs == 1:
            props["run"] = SCOPE_PROPS["run"]
        if spec.scope == "steps":
            props.update({k: v for k, v in SCOPE_PROPS.items() if k != "run"})
    for p in offered(spec):
        props[p.name] = param_schema(p)
        if p.required:
            required.append(p.name)
    schema = {"type": "object", "properties": props, "additionalProperties": False}
    if required:
        schema["required"] = required
    return {"name": spec.name, "description": description(spec), "input_schema": schema}


FIXED_TOOLS = [
    {"name": "list_runs",
     "description": "The runs in the store: ranks, source formats, devices, row counts, labels; then the limits of each run "
                    "(what its traces do not show).",
     "input_schema": {"type": "object", "properties": {}, "additionalProperties": False}},
    {"name": "describe_store",
     "description": "The store's tables (the views `sql` reads): columns, types, units and meanings, and row counts.",
     "input_schema": {"type": "object", "properties": {}, "additionalProperties": False}},
    {"name": "sql",
     "description": "One read-only DuckDB SQL query over the store's views (runs, gpu_ops, host_ops, regions, timer_stats, "
                    "metrics, memory_events; describe_store lists their columns). Strict: it reads the store's tables and "
                    "nothing else (no file, path, ATTACH, COPY or extension). At most max_rows rows and "
                    f"{SQL_BYTES // 1024} KiB of JSON come back, within {SQL_SECONDS:g} s; `cut` says when rows were left out. "
                    "Times are int64 ns (start_ns, end_ns).",
     "input_schema": {"type": "object", "properties": {
         "query": {"type": "string", "description": "A SELECT (or WITH, DESCRIBE, SHOW, SUMMARIZE, PIVOT) statement."},
         "max_rows": {"type": "integer", "minimum": 1, "maximum": SQL_ROWS_MAX, "default": SQL_ROWS,
                      "description": "Rows to return at most."}},
         "required": ["query"], "additionalProperties": False}},
    {"name": "explain",
     "description": "The evidence behind one finding of `diagnose` (by its id, e.g. pinned_memory): the finding, the GPU "
                    "ops of the kernels it cites (per name: count and time, and the longest instances) or, for an idle-time "
                    "finding, the GPU idle gaps of the scope split by cause.",
     "input_schema": {"type": "object", "properties": {
         "finding": {"type": "string", "description": "The finding's id, as diagnose shows it."},
         "run": SCOPE_PROPS["run"], "rank": SCOPE_PROPS["rank"],
         "max_rows": {"type": "integer", "minimum": 1, "maximum": 500, "default": 20,
                      "description": "Evidence rows per table at most."}},
         "required": ["finding"], "additionalProperties": False}},
]


def tools() -> list[dict]:
    """Every tool: one per registered analysis (that has one), then the fixed ones."""
    from ..analyses.registry import REGISTRY

    return [analysis_tool(s) for s in REGISTRY.values() if has_tool(s)] + FIXED_TOOLS


# ---------------------------------------------------------------- checking arguments
def _fits(value, schema: dict) -> bool:
    t = schema.get("type")
    if t == "array":
        return isinstance(value, list) and all(_fits(v, schema["items"]) for v in value)
    ok = {"string": isinstance(value, str),
          "integer": isinstance(value, int) and not isinstance(value, bool),
          "number": isinstance(value, (int, float)) and not isinstance(value, bool),
          "boolean": isinstance(value, bool)}.get(t, True)
    if ok and "enum" in schema and value not in schema["enum"]:
        return False
    if ok and "minimum" in schema and value < schema["minimum"]:
        return False
    if ok and "maximum" in schema and value > schema["maximum"]:
        return False
    return ok


def check_arguments(tool: dict, arguments: dict) -> dict:
    """`arguments` as the tool's schema allows them, or ToolError naming what is wrong."""
    schema = tool["input_schema"]
    props = schema["properties"]
    unknown = sorted(set(arguments) - set(props))
    if unknown:
        raise ToolError(f"{tool['name']}: unknown argument {unknown[0]!r} (takes: {', '.join(props) or 'none'})")
    for name in schema.get("required", []):
        if arguments.get(name) is None:
            raise ToolError(f"{tool['name']}: argument {name!r} is required")
    for name, value in arguments.items():
        if value is not None and not _fits(value, props[name]):
            item = props[name].get("items", props[name])
            want = ("one of " + ", ".join(map(str, item["enum"]))) if "enum" in item else props[name].get("type")
            raise ToolError(f"{tool['name']}: argument {name!r} = {json.dumps(value)[:80]}: expected {want}"
                            + (f" >= {props[name]['minimum']}" if "minimum" in props[name] else "")
                            + (f" <= {props[name]['maximum']}" if "maximum" in props[name] else ""))
    return {k: v for k, v in arguments.items() if v is not None}


# ---------------------------------------------------------------- calling
def call(store: str, name: str, arguments: dict | None) -> list[str]:
    """Run tool `name` on the store folder `store`: its text results (JSON documents).
    KeyError: no such tool; ToolError: the call is refused or fails in a way the user can act on."""
    by_name = {t["name"]: t for t in tools()}
    if name not in by_name:
        raise KeyError(name)
    args = check_arguments(by_name[name], dict(arguments or {}))
    try:
        return _call(store, name, args)
    except TraceqError as exc:
        raise ToolError(str(exc)) from None


def _dump(doc) -> str:
    return json.dumps(doc, default=str, indent=1, ensure_ascii=False)


def _call(store: str, name: str, args: dict) -> list[str]:
    from . import facts
    from ..analyses.registry import REGISTRY

    if name in REGISTRY:
        return _analysis(store, REGISTRY[name], args)
    if name == "list_runs":
        from ..engine.catalog import runs

        rows = runs(store).to_dicts()
        for r in rows:   # an object, as `traceq runs -f json` prints it
            r["labels"] = json.loads(r["labels"]) if r.get("labels") else {}
        return [_dump(rows), _dump({"limits": facts.limits(store)})]
    if name == "describe_store":
        return [_dump(facts.describe_store(store))]
    if name == "sql":
        return _sql(store, args)
    if name == "explain":
        doc = facts.explain(store, args["finding"], args.get("run"), args.get("rank"), args.get("max_rows", 20))
        return [_dump(doc), _dump({"limits": facts.limits(store, [doc["run"]])})]
    raise KeyError(name)


def _analysis(store: str, spec: Analysis, args: dict) -> list[str]:
    from . import facts
    from ..analyses.registry import compute

    runs = (args.pop("run_a"), args.pop("run_b")) if spec.runs == 2 else ()
    for p in spec.params:
        if p.multiple and isinstance(args.get(p.name), list):
            args[p.name] = list(args[p.name])
    result = compute(spec, store, runs=runs, **args)
    looked = result.run if isinstance(result.run, list) else [result.run] if result.run else None
    if spec.scope == "store":
        looked = None
    return [result.to_json(), _dump({"limits": facts.limits(store, looked)})]


def _sql(store: str, args: dict) -> list[str]:
    from . import facts
    from ..sql_guard import connect
    from ..sql_stream import capped
    from ..store import Store

    query = args["query"]
    con = connect(Store(store), query, strict=True)
    try:
        got = capped(con, query, max_rows=args.get("max_rows", SQL_ROWS), max_bytes=SQL_BYTES, seconds=SQL_SECONDS)
    finally:
        con.close()
    return [_dump(got), _dump({"limits": facts.limits(store)})]
