"""The documentation (issue 48): the MkDocs site builds with --strict, every command has a page
and every output column a declaration (so the generated reference documents it), the reference
is the text of --help, and the README's Python example runs and prints rows."""
from __future__ import annotations

import importlib.util
import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, SAMPLES

from traceq.analyses.registry import REGISTRY
from traceq.docs_reference import commands, documented, expand, md, section


def _pages() -> dict[str, str]:
    return {str(p.relative_to(REPO / "docs")): p.read_text() for p in sorted((REPO / "docs").rglob("*.md"))}


def _have_mkdocs() -> bool:
    return all(importlib.util.find_spec(m) for m in ("mkdocs", "material", "mkdocstrings", "mkdocstrings_handlers"))


@pytest.mark.skipif(not _have_mkdocs(), reason="the docs extra (mkdocs, mkdocs-material, mkdocstrings) is absent")
def test_mkdocs_build_strict(tmp_path):
    t = time.perf_counter()
    r = subprocess.run([sys.executable, "-m", "mkdocs", "build", "--strict", "-f", str(REPO / "mkdocs.yml"),
                        "-d", str(tmp_path / "site")], cwd=REPO, capture_output=True, text=True,
                       env={**__import__("os").environ, "NO_MKDOCS_2_WARNING": "1"})
    took = time.perf_counter() - t
    assert r.returncode == 0, r.stderr[-4000:]
    page = (tmp_path / "site" / "reference" / "index.html").read_text()
    for name in commands():
        assert f"traceq {name}" in page, name
    hot = (tmp_path / "site" / "commands" / "hotspots" / "index.html").read_text()
    assert "Output columns of hotspots" in hot and "total_ns" in hot
    assert (tmp_path / "site" / "api" / "index.html").read_text().count("open_store") >= 1
    print(f"mkdocs build --strict: {took:.1f} s")


def test_every_command_has_a_page_with_its_reference():
    """A command of `traceq --help` that no page's reference marker names is undocumented."""
    pages = _pages()
    named = documented(text for name, text in pages.items() if name != "reference.md")
    missing = sorted(set(commands()) - named)
    assert not missing, f"commands without a docs page (add <!-- traceq-reference: NAME --> to one): {missing}"
    unknown = sorted(named - set(commands()))
    assert not unknown, f"reference markers naming no command: {unknown}"
    assert "<!-- traceq-reference: all -->" in pages["reference.md"]


def test_the_reference_is_the_help_text():
    """Every option line of `traceq CMD --help` (flags, help, default) is in the generated section."""
    from typer.testing import CliRunner

    from traceq.cli import app

    runner = CliRunner()
    for name, cmd in commands().items():
        text = section(name)
        ctx = cmd.make_context(name, [], resilient_parsing=True)
        for p in cmd.get_params(ctx):
            record = p.get_help_record(ctx)
            if record is None or p.name == "help":
                continue
            assert f"`{record[0]}`" in text, (name, record[0])
            assert md(record[1]) in text, (name, record[1])
        spec = REGISTRY.get(name.replace("-", "_"))
        if spec is not None:
            help_text = runner.invoke(app, [name, "--help"], terminal_width=400).output
            for c in spec.columns:
                assert f"`{c.name}`" in text and f"  {c.name}" in help_text, (name, c.name)


def test_markers_expand_and_trace_strings_stay_literal():
    out = expand("x\n<!-- traceq-reference: summary -->\ny")
    assert "### traceq summary" in out and "idle_pct" in out and "traceq-reference" not in out
    quoted = "a marker in a code span: `<!-- traceq-reference: NAME -->` stays text"
    assert expand(quoted) == quoted
    assert md("a <b>*c*</b> `x_y|z` [l](u)") == r"a \<b\>\*c\*\</b\> `x_y|z` \[l\](u)"


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """The samples a reader has after the Quickstart and the experiment of make_experiment.py."""
    from traceq.ingest import ingest

    where = tmp_path_factory.mktemp("docs-store")
    st = where / ".traceq"
    ingest([SAMPLES / "nsys_sample.sqlite", SAMPLES / "slow_dataloader", SAMPLES / "fast_dataloader",
            SAMPLES / "gpu" / "train_slow_loader"], st, jobs=1)
    exp = where / "exp"
    subprocess.run([sys.executable, str(SAMPLES / "make_experiment.py"), str(exp), "--ranks", "2,4,8", "--batch", "16",
                    "--reps", "2", "--steps", "3"], check=True, capture_output=True)
    r = subprocess.run([sys.executable, "-m", "traceq", "ingest", str(exp), "--recursive", "--store",
                        str(where / "exp_store"), "-q"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    (where / "targets.toml").write_text('[[target]]\nname = "p8"\nwhere = "app=synth,p=8"\n'
                                        'metric = "step_time"\ntarget = 0.5\n')
    return where


def _result(store: Path, name: str):
    import traceq

    s, exp = traceq.open_store(store / ".traceq"), traceq.open_store(store / "exp_store")
    if name == "diff":
        return s.result(name, "slow_dataloader", "nsys_sample")
    if name == "model":
        return exp.result(name, param=["p"])
    if name == "check":
        return exp.result(name, targets=str(store / "targets.toml"))
    if REGISTRY[name].scope == "store":
        return exp.result(name)
    return s.result(name, run="train_slow_loader")


@pytest.mark.parametrize("name", list(REGISTRY))
def test_every_output_column_is_declared(store, name):
    """Each column an analysis returns, in its main table and in each further table, is declared
    (Analysis.columns / Analysis.tables), so --help and the generated reference document it."""
    spec = REGISTRY[name]
    r = _result(store, name)
    declared = {c.name for c in spec.columns}
    dynamic = set(r.params.get("param") or ()) if name == "model" else set()   # model's parameter columns
    missing = [c for c in r.df.columns if c not in declared | dynamic | {"run"}]
    assert not missing, f"{name}: undeclared output columns {missing}"
    tables = dict(spec.tables)
    for table, df in r.tables.items():
        assert table in tables, f"{name}: table {table!r} is not declared (Analysis.tables)"
        cols = {c.name for c in tables[table]}
        missing = [c for c in df.columns if c not in cols | {"run"}]
        assert not missing, f"{name}: table {table!r}: undeclared columns {missing}"


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, re.S)


@pytest.mark.parametrize("page", ["README.md", "docs/getting-started.md"])
def test_readme_python_example_prints_rows(tmp_path, page):
    """The page's Python example, after the Quickstart's ingest, prints something non-empty each
    time it prints, and every frame it prints has rows (issue 48: `traceq.summary(".traceq",
    window="hta")` printed an empty frame on the default, CPU-only, run)."""
    (tmp_path / "sample_traces").symlink_to(SAMPLES, target_is_directory=True)
    quick = (REPO / "README.md").read_text().split("## Quickstart", 1)[1].split("\n## ", 1)[0]
    ingest = re.search(r"&& traceq (ingest [^&\n]+?) &&", quick).group(1).split()
    r = subprocess.run([sys.executable, "-m", "traceq", *ingest, "-q"], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    blocks = _python_blocks((REPO / page).read_text())
    assert blocks, f"{page} has no Python example"
    probe = ("import builtins, polars\n_print = builtins.print\n"
             "def print(*a, **k):\n"
             "    for x in a:\n"
             "        assert not (isinstance(x, polars.DataFrame) and x.height == 0), 'an empty frame'\n"
             "        assert str(x).strip(), 'nothing printed'\n"
             "    _print(*a, **k)\n")
    r = subprocess.run([sys.executable, "-c", probe + "\n".join(blocks)], cwd=tmp_path, capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    assert r.stdout.strip()
