"""The thin command-line layer: parses options, calls the layers below, maps errors to exit
codes."""
