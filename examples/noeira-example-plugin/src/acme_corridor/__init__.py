"""Example noeira plugin: corridor envs (one a memory task with dict state), a GRU policy
network, a CSV metrics hook and a recipe for the memory env."""
