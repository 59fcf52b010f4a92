"""The `noeira robot ...` CLI commands, hooked into `noeira` by this distribution."""
