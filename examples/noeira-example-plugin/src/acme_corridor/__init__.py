"""Example noeira plugin: the `corridor` env and a CSV metrics hook."""
