"""Where a workload runs: the bare host (NativePlatform) or a QEMU guest (QemuPlatform)."""
