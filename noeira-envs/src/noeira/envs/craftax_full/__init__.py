"""Craftax, the full game (Matthews et al., ICML 2024), as a batched torch env: see :mod:`.env`."""
