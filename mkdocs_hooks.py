"""MkDocs hooks (mkdocs.yml `hooks:`): the command reference, generated from the CLI at build
time by traceq.docs_reference, so the site and `traceq COMMAND --help` cannot disagree."""
from traceq.docs_reference import on_page_markdown  # noqa: F401 - MkDocs calls it by name
