"""The command reference of the documentation site, generated from the CLI itself.

Every command's section is built from the click command typer makes of it (the same objects
`traceq COMMAND --help` prints): its description, each argument and option with the help text,
metavar and default `--help` shows, and, for an analysis of the registry (traceq/analyses),
its output columns with their units (`Analysis.columns`, the units JSON declares). So the
documentation and the CLI cannot disagree: there is no second copy to keep in step.

    commands()            {name: click command}, in the order `traceq --help` lists them
    section(name, level)  the Markdown of one command
    reference()           the Markdown of every command
    expand(markdown)      a page with each `<!-- traceq-reference: NAME -->` replaced by NAME's
                          section (`all`: every command)
    on_page_markdown      the MkDocs hook (mkdocs.yml `hooks:`) that calls expand

`python -m traceq.docs_reference [NAME...]` prints the Markdown.
"""
from __future__ import annotations

import re
import sys

# a marker is a line of its own (one quoted in a code span, as in docs/development.md, is text)
MARKER = re.compile(r"^<!--\s*traceq-reference:\s*([\w-]+)\s*-->[ \t]*$", re.M)
_SPECIAL = re.compile(r"([\\*_\[\]<>#|~])")


def commands() -> dict:
    """The click commands of `traceq`, by name, in `--help` order."""
    import typer.main

    from .cli import app

    group = typer.main.get_command(app)
    ctx = group.make_context("traceq", [], resilient_parsing=True)
    return {name: group.get_command(ctx, name) for name in group.list_commands(ctx)}


def _analysis(name: str):
    """The declaration a command is made from: an analysis of the registry, or an alias's."""
    from .analyses.registry import REGISTRY
    from .cli_analyses import alias_spec

    alias = alias_spec(name)
    return alias[0] if alias else REGISTRY.get(name.replace("-", "_")) or REGISTRY.get(name)


def md(text: str) -> str:
    """Plain text (help written for a terminal) as Markdown that shows it literally: code spans
    (`...`) are kept, everything else that Markdown or HTML would read is escaped."""
    parts = text.split("`")
    if len(parts) % 2 == 0:     # an unmatched backtick: no code spans at all
        return _SPECIAL.sub(r"\\\1", text).replace("`", "\\`")
    return "`".join(p if i % 2 else _SPECIAL.sub(r"\\\1", p) for i, p in enumerate(parts))


def _code(text: str) -> str:
    """`text` as one code span, whatever backticks it holds."""
    fence = "``" if "`" in text else "`"
    pad = " " if text.startswith("`") or text.endswith("`") else ""
    return f"{fence}{pad}{text}{pad}{fence}"


def _paragraphs(help_text: str) -> list[str]:
    """click's help text as Markdown blocks: a paragraph after a `\\b` line keeps its lines (a
    code block); other paragraphs are re-flowed, as `--help` does."""
    out = []
    for para in re.split(r"\n\s*\n", help_text.strip()):
        lines = para.split("\n")
        if lines and lines[0].strip() == "\b":
            body = [ln[2:] if ln.startswith("  ") else ln for ln in lines[1:]]
            out.append("```text\n" + "\n".join(body) + "\n```")
        elif para.strip():
            out.append(md(" ".join(ln.strip() for ln in lines)))
    return out


def _description(cmd, name: str) -> str:
    spec = _analysis(name)
    text = spec.help if spec is not None else (cmd.help or "")
    return "\n\n".join(_paragraphs(text))


def _params(cmd, ctx) -> list[str]:
    """One list item per argument and option, with the text `--help` prints for it."""
    items = []
    for p in cmd.get_params(ctx):
        if getattr(p, "hidden", False) or p.name == "help":
            continue
        record = p.get_help_record(ctx)
        if not record:
            continue
        flags, text = record
        items.append(f"- {_code(flags)}: {md(text)}" if text else f"- {_code(flags)}")
    return items


def _column_items(columns) -> list[str]:
    from .analyses.spec import unit_of

    out = []
    for c in columns:
        unit = c.unit or unit_of(c.name)
        out.append(f"- {_code(c.name)}" + (f" \\[{md(unit)}\\]" if unit else "") + f": {md(c.meaning)}")
    return out


def _columns(name: str, h: str) -> list[str]:
    """The output columns of an analysis: its main table, then each further table by name."""
    spec = _analysis(name)
    if spec is None:
        return []
    out = []
    if spec.columns:
        out += [f"{h}# Output columns of {name}", "", *_column_items(spec.columns), ""]
    for table, columns in spec.tables:
        out += [f"{h}# Table {table} of {name}", "", *_column_items(columns), ""]
    return out


def section(name: str, level: int = 2, cmd=None) -> str:
    """The Markdown of one command: `traceq NAME` heading, usage, description, parameters,
    output columns, sort order, report section and examples (as --help has them)."""
    if cmd is None:
        found = commands()
        if name not in found:
            raise KeyError(f"no traceq command named {name!r} (commands: {', '.join(found)})")
        cmd = found[name]
    ctx = cmd.make_context(name, [], resilient_parsing=True)
    h = "#" * level
    usage = " ".join(cmd.collect_usage_pieces(ctx))
    out = [f"{h} traceq {name}", "", "```text", f"traceq {name} {usage}".rstrip(), "```", "",
           _description(cmd, name), ""]
    spec = _analysis(name)
    params = _params(cmd, ctx)
    if params:
        out += [f"{h}# Parameters of {name}", "", *params, ""]
    out += _columns(name, h)
    if spec is not None:
        if spec.sort:
            out += ["Rows sorted by " + ", ".join(_code(s) for s in spec.sort) + ".", ""]
        if spec.report:
            out += [f"The HTML report (`traceq report`) shows it in the section \"{md(spec.report)}\".", ""]
        if spec.examples:
            out += [f"{h}# Examples of {name}", "", "```text", *spec.examples, "```", ""]
    return "\n".join(out)


def reference(level: int = 2) -> str:
    return "\n".join(section(n, level, c) for n, c in commands().items())


def expand(markdown: str) -> str:
    """Replace each reference marker of a page by the section it names."""
    def one(m):
        name = m.group(1)
        return reference() if name == "all" else section(name, 3)

    return MARKER.sub(one, markdown)


def on_page_markdown(markdown: str, page=None, config=None, files=None) -> str:   # noqa: ARG001 - MkDocs' signature
    """MkDocs hook: the reference sections, generated at build time."""
    return expand(markdown)


def documented(pages) -> set[str]:
    """The command names the reference markers of these Markdown texts name."""
    return {m.group(1) for text in pages for m in MARKER.finditer(text)}


if __name__ == "__main__":
    names = sys.argv[1:]
    sys.stdout.write("\n".join(section(n) for n in names) if names else reference())
