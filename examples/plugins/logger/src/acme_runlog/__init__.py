"""Example noeira logger: every run's events appended to one JSON-lines file, and ``noeira runlog``."""
