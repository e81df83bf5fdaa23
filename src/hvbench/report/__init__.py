"""What people read: a run loaded from the store, terminal tables, HTML, plots and
exports. Renderers return lines, tables or bytes; only the CLI prints."""
