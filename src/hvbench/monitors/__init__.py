"""Host-side monitors sampled while a workload runs: block device counters (iostat -x),
QEMU's threads by class (CPU, run-queue wait, blocked, executions), host CPU.

The parsers and metric formulas are pure functions of /proc text (unit-tested on stored
snapshots); :mod:`hvbench.monitors.sampler` reads the files in one background thread.
"""
