"""traceq's version (one place: the package, the CLI, the report and the findings cache read it)."""
__version__ = "0.1.0"
