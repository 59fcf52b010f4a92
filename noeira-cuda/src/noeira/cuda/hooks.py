"""Hook implementations of noeira-cuda (default graph backend, CLI commands)."""
