"""The cell kinds: one module per workload kind, found by ``spec.kind`` in
:mod:`hvbench.run.cells.registry`, all implementing :class:`~hvbench.run.cells.base.CellKind`."""
