"""Pure analysis of stored measurements: statistics, trends, comparisons, bounds,
scenario tables and the metric catalogue. No rendering, no I/O."""
