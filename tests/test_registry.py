"""One registry, three faces: every analysis of `traceq.analyses.registry.REGISTRY` is run on the
sample runs through the CLI table, the CLI JSON and the Python API, and they must agree
(same rows, same headline, units for every unit-carrying column, the run in every row)."""
from __future__ import annotations

import inspect
import json

import polars as pl
import pytest

from conftest import SAMPLES, run_traceq

import traceq
from traceq.analyses.registry import REGISTRY

# How each analysis is exercised on the samples (a new analysis must be added here).
CASES = {
    "hotspots": ([], {"run": "nsys_sample", "top": 5}),
    "summary": ([], {"run": "nsys_sample"}),
    "overlap": ([], {"run": "nsys_sample"}),
    "breakdown": ([], {"run": "slow_dataloader", "by": "annotation"}),
    "stalls": ([], {"run": "slow_dataloader"}),
    "diagnose": ([], {"run": "nsys_sample"}),
    "diff": (["slow_dataloader", "fast_dataloader"], {"top": 4}),
    "ranks": ([], {"run": "nsys_sample"}),
    "compare": ([], {"baseline": "fast_dataloader"}),
    "roofline": ([], {"run": "slow_dataloader", "peak_tflops": 100.0}),
    "memory": ([], {"run": "slow_dataloader"}),
    "overview": ([], {"run": "slow_dataloader"}),
    "operators": ([], {"run": "slow_dataloader"}),
    "critical_path": ([], {"run": "slow_dataloader"}),
    "steps": ([], {"run": "nsys_sample"}),
}
# Analyses that need data the samples do not have (a parameter sweep, a targets file); their CLI,
# JSON and exit codes are covered by tests/test_experiments.py.
SKIP = {"model": "needs runs labelled with a parameter sweep (tests/test_experiments.py)",
        "check": "needs a targets file and repeated runs (tests/test_experiments.py)"}


traceq_cli = run_traceq


@pytest.fixture(scope="module")
def work(tmp_path_factory):
    d = tmp_path_factory.mktemp("registry")
    r = traceq_cli("ingest", SAMPLES / "nsys_sample.sqlite", SAMPLES / "slow_dataloader", SAMPLES / "fast_dataloader",
                   "--label", "amp=off", "-q", cwd=d)
    assert r.returncode == 0, r.stderr
    return d


def _cli_args(name, runs, kw):
    args = [name.replace("_", "-"), *runs]
    for k, v in kw.items():
        args += ["--" + k.replace("_", "-"), str(v)]
    return args


def test_every_registered_analysis_has_a_case():
    assert set(CASES) | set(SKIP) == set(REGISTRY) and not set(CASES) & set(SKIP)


def _same(a: list[dict], b: list[dict]):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.keys() == y.keys()
        for k in x:
            if isinstance(x[k], float) and y[k] is not None:
                assert x[k] == pytest.approx(y[k], rel=1e-12), k
            else:
                assert x[k] == y[k] or str(x[k]) == str(y[k]), k


@pytest.mark.parametrize("name", sorted(CASES))
def test_cli_json_table_and_python_api_agree(work, name):
    runs, kw = CASES[name]
    spec = REGISTRY[name]
    s = traceq.open_store(work / ".traceq")
    df = getattr(s, name)(*runs, **kw)
    assert isinstance(df, pl.DataFrame)
    res = s.result(name, *runs, **kw)
    assert res.df.equals(df) and res.headline == df.headline

    r = traceq_cli(*_cli_args(name, runs, kw), "-f", "json", cwd=work)
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    table = traceq_cli(*_cli_args(name, runs, kw), cwd=work)
    assert table.returncode == 0, table.stderr
    # the table's first line is the headline the API and JSON carry
    if name == "diagnose":      # one verdict line per rank, above that rank's findings
        from traceq.analyses.diagnose import headline

        first = table.stdout.splitlines()[0]
        assert first and first == headline(df.row(0, named=True))[:len(first)]
    else:
        assert df.headline and table.stdout.splitlines()[0] == df.headline.splitlines()[0][:len(table.stdout.splitlines()[0])]
    api_rows = json.loads(json.dumps(df.to_dicts(), default=str))
    if spec.json is None:       # the common document
        assert doc["analysis"] == name and doc["run"] == kw["run"] and doc["headline"] == df.headline
        assert doc["labels"] == {"amp": "off"}
        assert all(row["run"] == kw["run"] for row in doc["rows"])
        _same([{k: v for k, v in row.items() if k != "run"} for row in doc["rows"]], api_rows)
        for col in df.columns:
            if col.endswith("_ns"):
                assert doc["units"][col] == "ns"
            if col.endswith("_pct"):
                assert doc["units"][col] == "%"
        for t, frame in df.tables.items():
            _same([{k: v for k, v in row.items() if k != "run"} for row in doc[t]],
                  json.loads(json.dumps(frame.to_dicts(), default=str)))
    elif name == "compare":     # a list of rows, one per metric and configuration
        _same(doc, api_rows)
        assert {r["config"] for r in doc} == {"amp=off"}     # the three runs share their labels: repetitions
    elif name == "diagnose":    # {"runs": [one verdict per rank]}, without the table's `stepped`
        assert list(doc) == ["runs"] and [r["run"] for r in doc["runs"]] == [kw["run"]] * df.height
        _same(doc["runs"], json.loads(json.dumps(df.drop("stepped").to_dicts(), default=str)))
    elif name == "ranks":       # ranks keeps its fixed shape (issue 10)
        assert list(doc) == ["ranks", "collectives", "straggler"]
        from traceq.analyses.ranks import COLLECTIVE_COLUMNS, RANKS_COLUMNS

        _same(doc["ranks"], json.loads(json.dumps(df.select(RANKS_COLUMNS).to_dicts(), default=str)))
        _same(doc["collectives"], df.tables["collectives"].select(COLLECTIVE_COLUMNS).to_dicts())
        assert df.run == kw["run"] and df.headline.startswith(f"run {kw['run']}, 1 rank")
    elif name == "roofline":    # the common document + the efficiency view; dims and types as lists
        assert doc["analysis"] == name and doc["run"] == kw["run"] and doc["headline"] == df.headline
        assert set(doc["efficiency"]) >= {"device", "mfu_pct", "modelled_pct", "worst"}
        as_text = [{k: (json.dumps(v, separators=(",", ":")) if k in ("input_dims", "input_types") and v is not None
                        else v) for k, v in row.items() if k != "run"} for row in doc["rows"]]
        _same(as_text, api_rows)
        _same(doc["unmodelled"], json.loads(json.dumps(df.tables["unmodelled"].to_dicts(), default=str)))
        assert doc["units"]["kernel_ns"] == "ns" and doc["units"]["roofline_pct"] == "%"
    elif name == "overview":    # rows, average and gpu tables in the shape (issue 33)
        assert doc["analysis"] == name and doc["run"] == kw["run"] and doc["headline"] == df.headline
        assert all(row["run"] == kw["run"] for row in doc["rows"] + doc["average"])
        _same([{k: v for k, v in row.items() if k != "run"} for row in doc["rows"]], api_rows)
        _same(doc["gpu"], json.loads(json.dumps(df.tables["gpu"].to_dicts(), default=str)))
        assert doc["units"]["kernel_ns"] == "ns"
    elif name == "critical_path":   # rows, bounds and ops in the shape (issue 34)
        assert doc["analysis"] == name and doc["run"] == kw["run"] and doc["headline"] == df.headline
        assert all(set(row) >= {"run", "rank", "step", "start_ns", "span_ns", "path_ns"} for row in doc["rows"])
        _same([{k: v for k, v in row.items() if k != "run"} for row in doc["rows"]], api_rows)
        for t, keys in (("bounds", ["rank", "step", "bound", "ns", "pct"]),
                        ("ops", ["rank", "name", "kind", "category", "ns", "pct"])):
            assert doc[t] and all(list(row) == keys for row in doc[t])
            _same(doc[t], json.loads(json.dumps(df.tables[t].to_dicts(), default=str)))
    else:                       # diff keeps its fixed shape
        assert set(doc) == {"categories", "kernels", "regions", "headline", "per_step"}
        _same(doc["kernels"], api_rows)
        assert doc["headline"]["run_a"] == runs[0] and doc["headline"]["run_b"] == runs[1]
    # CSV has the same rows as JSON's main table
    csv = traceq_cli(*_cli_args(name, runs, kw), "-f", "csv", cwd=work)
    assert csv.returncode == 0, csv.stderr
    first = csv.stdout.split("\n# ")[0]
    if spec.json is None:
        assert pl.read_csv(first.encode()).height == len(doc["rows"])
    if name == "ranks":
        assert pl.read_csv(first.encode()).height == len(doc["ranks"]) == df.height
    if name == "compare":
        assert pl.read_csv(first.encode()).height == len(doc) == df.height
    if name == "diagnose":      # one row per finding (a rank without any: one row)
        assert pl.read_csv(first.encode()).height == sum(max(1, len(r["findings"])) for r in doc["runs"])


def test_api_parameters_match_the_cli_options():
    from typer.main import get_command

    from traceq.cli import app

    cli = get_command(app)
    for name, spec in REGISTRY.items():
        method = getattr(traceq.TraceStore, name)
        api = set(inspect.signature(method).parameters) - {"self"}
        # run_opt: --run A --run B, the CLI's other spelling of a two-run analysis's RUN_A RUN_B
        opts = {p.name for p in cli.commands[name.replace("_", "-")].params} - {"fmt", "output", "wide", "store", "run_opt"}
        assert api == opts, name
        for p in spec.params:   # same defaults (a required one has none)
            want = inspect.Parameter.empty if p.required else p.default
            assert inspect.signature(method).parameters[p.name].default == want


def test_help_metavars_read_well():
    r = traceq_cli("hotspots", "--help", cwd=SAMPLES)
    for text in ("--run NAME", "--rank N", "--steps A:B", "--store DIR", "-f, --format table|json|csv",
                 "-o, --output FILE", "--wide", "Output columns:", "total_ns [ns]"):
        assert text in r.stdout, text
    r = traceq_cli("ingest", "--help", cwd=SAMPLES)
    assert "--input-format" in r.stdout and "-o, --output FILE" in r.stdout


def test_dir_lists_the_api_and_old_functions_still_work(work):
    names = dir(traceq)
    for n in ("open_store", "hotspots", "summary", "overlap", "breakdown", "stalls", "diff", "runs", "sql", "ingest"):
        assert n in names
    old = traceq.hotspots(work / ".traceq", run="nsys_sample", top=3)     # plain DataFrame, as before
    new = traceq.open_store(work / ".traceq").hotspots(run="nsys_sample", top=3)
    assert old.equals(new)
    assert set(REGISTRY) <= set(dir(traceq.open_store(work / ".traceq")))


def test_api_bad_keyword_and_choice_are_errors(work):
    from traceq.errors import TraceqError

    s = traceq.open_store(work / ".traceq")
    with pytest.raises(TypeError):
        s.hotspots(run="nsys_sample", bogus=1)
    with pytest.raises(TraceqError, match="--window"):
        s.summary(run="nsys_sample", window="nope")


def test_output_file_and_ingest_format_options(work, tmp_path):
    out = tmp_path / "hot.json"
    r = traceq_cli("hotspots", "--run", "nsys_sample", "-f", "json", "-o", out, cwd=work)
    assert r.returncode == 0 and r.stdout == ""
    assert json.loads(out.read_text())["analysis"] == "hotspots"
    r = traceq_cli("ingest", SAMPLES / "nsys_sample.sqlite", "--run", "again", "--input-format", "nsys", "-f", "json",
                   cwd=work)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)[0]["format"] == "nsys"
    r = traceq_cli("ingest", SAMPLES / "nsys_sample.sqlite", "--run", "again2", "--format", "nsys", "-q", cwd=work)
    assert r.returncode == 0 and "--input-format nsys" in r.stderr      # the old spelling still works, with a hint



def test_declared_report_sections_exist():
    for spec in REGISTRY.values():
        if spec.report:
            assert spec.report_section is not None, spec.name
            # the section's title is the declared one: spelled out, or taken from the declaration
            src = inspect.getsource(spec.report_section)
            assert f'"{spec.report.split(":")[0]}' in src or "ANALYSIS.report" in src, spec.name


def test_traceq_ingest_stays_callable_after_the_submodule_is_imported(tmp_path):
    import traceq.ingest  # noqa: F401 - sets the package attribute to the submodule

    [res] = traceq.ingest([str(SAMPLES / "nsys_sample.sqlite")], tmp_path / "s")
    assert res.run == "nsys_sample" and res.counts["gpu_ops"] == 39
