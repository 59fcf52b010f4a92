"""Example noeira env ``reach``: push a point mass to a target."""
