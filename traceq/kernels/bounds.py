"""How much of a kernel name the classifiers read (docs/hardening.md). A module of its own,
without polars, so that the advice rules' import of `tensor_cores` at start-up stays cheap."""

# how much of a name is parsed (real names are a few KB; a longer one is read as cut here) and
# how many wrappers deep a wrapper's template argument is unwrapped
PARSE_CHARS = 65536
MAX_WRAPPERS = 8
