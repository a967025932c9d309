"""One module per rcusim verb (see app.cli)."""
