"""Facts about the host read from /proc, /sys and tool versions; process helpers."""
