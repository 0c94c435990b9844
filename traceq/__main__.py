"""`python -m traceq` = the `traceq` command."""
from traceq.cli import main

main()
