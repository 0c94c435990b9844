"""Turn figures and DataFrames into what the Jinja template renders (no HTML strings here).

- `plot(fig)`: a plotly Figure as JSON for `Plotly.newPlot`, safe inside a <script> element.
- `table(df)`: headers and formatted cells, using the same unit rules as the terminal
  (`*_ns` shown in µs/ms/s, `*_pct` as %, ...: traceq.render), full values in `title`.
- `render_page(context)`: the template `traceq/templates/report.html.j2` with plotly.js inlined
  once, autoescaped (kernel names such as `foo<float>` are text, never markup).
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from importlib import resources

import polars as pl

_ids = itertools.count()


@dataclass
class Plot:
    id: str
    json: str          # figure JSON, already escaped for embedding in <script type="application/json">
    caption: str | None = None
    kind: str = ""     # what the chart shows (data-chart attribute: timeline, categories, ...)


@dataclass
class Table:
    id: str
    headers: list[str]
    numeric: list[bool]
    rows: list[list[tuple[str, str]]]    # (shown text, full text for the title tooltip)
    row_classes: list[str] = field(default_factory=list)
    caption: str | None = None
    total_rows: int = 0                  # rows before truncation
    kind: str = ""                       # what the table shows (data-table attribute)


def _script_safe(text: str) -> str:
    # JSON is still valid with these escapes; nothing in it can close the <script> element.
    return text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def plot(fig, caption: str | None = None) -> Plot | None:
    if fig is None:
        return None
    import plotly.io as pio

    return Plot(f"fig{next(_ids)}", _script_safe(pio.to_json(fig, validate=False)), caption)


def table(df: pl.DataFrame | None, *, caption: str | None = None, max_rows: int = 50,
          row_classes: list[str] | None = None, widths: dict[str, int] | None = None,
          titles: dict[str, list[str | None]] | None = None) -> Table | None:
    """Format `df` for HTML; long text is shortened in the middle, the full value goes in `title`
    (or, for a column named in `titles`, the text given there: e.g. the advice behind a label)."""
    if df is None or df.height == 0:
        return None
    from ..render import duration_unit, header_and_formatter, shorten, with_short_names

    total = df.height
    df = df.head(max_rows)
    full_names = df["name"].to_list() if "identity" in df.columns and "name" in df.columns else None
    df = with_short_names(df, 80)
    ns_cols = [c for c in df.columns if c.endswith("_ns") and df[c].dtype.is_numeric()]
    ns_unit = duration_unit(pl.concat([df[c].cast(pl.Float64) for c in ns_cols])) if ns_cols else None
    headers, fmts, numeric = [], [], []
    for name in df.columns:
        h, f = header_and_formatter(name, df[name], ns_unit)
        headers.append(h)
        fmts.append(f)
        numeric.append(df[name].dtype.is_numeric())
    widths = widths or {}
    titles = titles or {}
    rows = []
    for i, row in enumerate(df.iter_rows()):
        cells = []
        for name, f, v in zip(df.columns, fmts, row):
            if name in titles:
                shown = "" if v is None else str(v)
                full = titles[name][i] or shown
            elif isinstance(v, str):
                full = full_names[i] if name == "name" and full_names else v   # the full signature as tooltip
                shown = shorten(v, widths.get(name, 80))
            elif isinstance(v, bool):
                full = shown = "yes" if v else ""
            else:
                shown = f(v)
                full = "" if v is None else str(v)
            cells.append((shown, full))
        rows.append(cells)
    return Table(f"tbl{next(_ids)}", headers, numeric, rows, (row_classes or [])[:max_rows], caption, total)


def plotly_js() -> str:
    from plotly.offline import get_plotlyjs

    return get_plotlyjs()


def render_page(context: dict) -> str:
    import jinja2

    env = jinja2.Environment(
        loader=jinja2.FunctionLoader(_load_template), autoescape=True, trim_blocks=True, lstrip_blocks=True,
        undefined=jinja2.StrictUndefined,
    )
    return env.get_template("report.html.j2").render(plotly_js=plotly_js(), template_json=template_json(), **context)


def template_json() -> str:
    """The plotly template every figure of the page uses (applied in the browser)."""
    import plotly.io as pio

    from .figures import TEMPLATE

    from plotly.io.json import to_json_plotly

    return _script_safe(to_json_plotly(pio.templates[TEMPLATE].to_plotly_json()))


def _load_template(name: str) -> str:
    return resources.files("traceq").joinpath("templates", name).read_text(encoding="utf-8")
