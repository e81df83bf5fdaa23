"""Bottom layer: declarative specs and pure logic. No process or I/O imports."""
