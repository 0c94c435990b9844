"""Issue 37: how names read in tables and headlines — a look-alike's tag comes from the name
itself (the same in every command), a cut name shows the cut, --wide shows the full name, names
keep a readable width on a narrow terminal while secondary statistics go, the ingest table
shows paths as given, and `traceq --help` lists commands in the order a newcomer meets them."""
from __future__ import annotations

import hashlib
import json

import polars as pl
from typer.testing import CliRunner

from traceq.cli import app
from traceq.kernels.identity import kernel_identity
from traceq.kernels.labels import short_labels
from traceq.render import emit, layout
from traceq.text import shorten_path

ADD4 = "void at::native::vectorized_elementwise_kernel<4, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int)"
ADD2 = "void at::native::vectorized_elementwise_kernel<2, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int)"
ADD1 = "void at::native::vectorized_elementwise_kernel<1, at::native::CUDAFunctor_add<float>, at::detail::Array<char*, 3> >(int)"


def _tag(name: str) -> str:
    return "#" + hashlib.blake2b(name.encode(), digest_size=16).hexdigest()[:4]


def _labels(names):
    return dict(zip(names, short_labels(names, [kernel_identity(n) for n in names])))


def test_look_alike_tag_is_the_same_whatever_else_the_table_holds():
    # on main ADD4 was '#3' among three look-alikes and '#2' beside ADD2 alone (rank in sorted order)
    three, two = _labels([ADD1, ADD2, ADD4]), _labels([ADD4, ADD2])
    assert three[ADD4] == two[ADD4] == f"at::native::vectorized_elementwise_kernel {_tag(ADD4)}"
    assert three[ADD2] == two[ADD2] == f"at::native::vectorized_elementwise_kernel {_tag(ADD2)}"


def _trace(tmp_path, kernels):
    from kineto_synth import Trace

    from traceq.ingest import ingest

    t = Trace()
    t.step(1, 0, 5000)
    for k, (name, dur) in enumerate(kernels):
        t.launch(name, 10 + 40 * k, 10, 20 + 900 * k, dur)
    store = tmp_path / "s"
    ingest([t.write(tmp_path / "t.json.gz")], store=store, jobs=1)
    return store


def _run(*args, columns=200):
    out = CliRunner().invoke(app, list(args), env={"COLUMNS": str(columns), "TRACEQ_WIDTH": str(columns)})
    assert out.exit_code == 0, out.output
    return out.output


def test_hotspots_and_diff_tag_a_kernel_alike(tmp_path):
    """Run a has ADD1, ADD2, ADD4; run b only ADD2 and ADD4. ADD4 carries one tag in the
    hotspots of a and in the diff a -> b (on main: '#3' and '#2')."""
    from kineto_synth import Trace

    from traceq.ingest import ingest

    store = tmp_path / "s"
    for run, ks in (("a", [ADD1, ADD2, ADD4]), ("b", [ADD2, ADD4])):
        t = Trace()
        t.step(1, 0, 5000)
        for k, name in enumerate(ks):
            t.launch(name, 10 + 40 * k, 10, 20 + 900 * k, 300 + 100 * k)
        ingest([t.write(tmp_path / f"{run}.json.gz")], store=store, run=run, jobs=1)
    hot = _run("hotspots", "--run", "a", "--store", str(store))
    diff = _run("diff", "a", "b", "--store", str(store))
    assert _tag(ADD4) in hot and _tag(ADD4) in diff
    assert _tag(ADD2) in hot and _tag(ADD2) in diff


def test_wide_and_json_show_the_full_name(tmp_path):
    store = _trace(tmp_path, [(ADD4, 300), (ADD2, 200)])
    wide = _run("hotspots", "--wide", "--store", str(store), columns=100)
    assert ADD4 in wide and ADD2 in wide
    rows = json.loads(_run("hotspots", "--format", "json", "--store", str(store)))["rows"]
    assert {r["name"] for r in rows} == {ADD4, ADD2}


def test_breakdown_headline_marks_a_cut_region_name(tmp_path):
    """A 79-character region name: main cut it at 50 characters with no marker."""
    from kineto_synth import Trace

    from traceq.ingest import ingest

    name = "## Call CompiledFxGraph f4ii27ddivzklxr54hd45chngp247rp2ytmjxpq3f55wet4szuh7 ##"
    t = Trace()
    t.annotation(name, 0, 1000)
    t.launch(ADD4, 10, 10, 20, 300)
    ingest([t.write(tmp_path / "t.json.gz")], store=tmp_path / "s", jobs=1)
    out = _run("breakdown", "--store", str(tmp_path / "s"))
    headline = next(line for line in out.splitlines() if "top:" in line)
    shown = headline.split("top: ", 1)[1].split(" 0.")[0].split(" 1.")[0]
    assert "…" in shown and shown.startswith("## Call CompiledFxGraph f4ii") and shown.endswith("##")
    assert len(shown) == 60


def test_narrow_table_drops_secondary_statistics_before_cutting_names_below_40():
    """name (60 wide), count, total, mean, median on 85 columns: main cut the name to 35 to keep
    both mean and median; now median (first of drop_first) goes and the name keeps 49."""
    names = ["name", "count", "total_ns", "mean_ns", "median_ns"]
    headers = ["name", "count", "total (ms)", "mean (ms)", "median (ms)"]
    cells = [["x" * 60], ["1,000"], ["12,345.678"], ["12.345"], ["12.345"]]
    numeric = [False, True, True, True, True]
    # table width = sum(width + 3) + 1: all five 60+5+10+9+11 + 16 = 111; name at 40: 91 > 85;
    # without median (11 + 3): 97 -> the name gives 12: 48 ... (60 - 12 = 48)
    keep, widths, dropped = layout(names, headers, cells, numeric, 85, drop_first=("median_ns", "mean_ns"))
    assert [names[i] for i in dropped] == ["median_ns"] and widths[0] == 48
    # 70 columns: without median and mean 60+5+10 + 10 = 85 -> name 45; with mean at 40: 77 > 70
    keep, widths, dropped = layout(names, headers, cells, numeric, 70, drop_first=("median_ns", "mean_ns"))
    assert [names[i] for i in dropped] == ["median_ns", "mean_ns"] and widths[0] == 45
    # wide enough for everything at a readable name: nothing goes, the name is cut to 50
    keep, widths, dropped = layout(names, headers, cells, numeric, 101, drop_first=("median_ns", "mean_ns"))
    assert dropped == [] and widths[0] == 50


def test_shorten_path_keeps_the_file_name_and_marks_the_cut():
    p = "/work/a/very/long/directory/tree/of/experiments/run_0042/rank0/eager_trace.json.gz"
    s = shorten_path(p, 50)
    assert len(s) == 50 and s.endswith("/eager_trace.json.gz") and "…" in s and s.startswith("/work/a/")
    assert shorten_path("t.json.gz", 50) == "t.json.gz"


def test_ingest_table_shows_the_path_as_given(tmp_path, monkeypatch):
    from kineto_synth import Trace

    t = Trace()
    t.step(1, 0, 1000)
    t.launch(ADD4, 10, 10, 20, 300)
    path = t.write(tmp_path / "t.json.gz")
    deep = tmp_path / "a" / "b" / "c"
    deep.mkdir(parents=True)
    monkeypatch.chdir(deep)
    out = _run("ingest", str(path), "--store", str(tmp_path / "s"))
    row = next(line for line in out.splitlines() if "t.json.gz" in line)
    assert row.split()[0] == str(path)         # as given (absolute); main: '../../../t.json.gz'
    out = _run("ingest", str(path), "--run", "narrow", "--store", str(tmp_path / "s1"), columns=80)
    cell = next(line for line in out.splitlines() if "t.json.gz" in line).split()[0]
    # 80 columns: cut in the middle, the file name kept whole; main: '../../../t.json.gz'
    assert "…" in cell and cell.startswith("/tmp/") and cell.endswith("…/t.json.gz") and len(cell) < len(str(path))
    out = _run("ingest", "../../../t.json.gz", "--run", "again", "--store", str(tmp_path / "s2"))
    assert next(line for line in out.splitlines() if "t.json.gz" in line).split()[0] == "../../../t.json.gz"


def test_help_lists_commands_in_the_order_a_newcomer_meets_them():
    out = _run("--help")
    listed = [line.split()[0] for line in out.split("Commands")[1].splitlines()[1:] if line.startswith("  ")]
    assert listed[:4] == ["ingest", "runs", "diagnose", "summary"]
    assert listed[-5:] == ["sql", "mcp", "doctor", "rm", "export"]


def test_html_hotspots_show_the_terminal_label_with_the_full_name_as_tooltip(tmp_path):
    """main showed the raw signature cut in the middle (`void at::native::vectorized_elementwise_…`)."""
    import html

    from traceq.report.page import build_report

    store = _trace(tmp_path, [(ADD4, 300), (ADD2, 200)])
    out = tmp_path / "r.html"
    build_report(store, None, out)
    page = out.read_text()
    label = f"at::native::vectorized_elementwise_kernel {_tag(ADD4)}"
    assert f'<td title="{html.escape(ADD4, quote=True)}">{label}</td>' in page
