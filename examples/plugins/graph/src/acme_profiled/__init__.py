"""Example noeira graph backend ``profiled``: each phase of the loop a named profiler range."""
