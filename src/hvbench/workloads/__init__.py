"""Workloads: the measured programs (fio, ...), their argv builders and result parsers."""
