"""The thin command-line layer: parses options, calls the layers below, maps errors to exit
codes."""

from hvbench.kinds import install

# Start-up: every workload kind registers itself before any command parses a study.
install()
