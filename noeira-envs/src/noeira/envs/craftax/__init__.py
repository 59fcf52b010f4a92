"""Craftax-Classic (Matthews et al., ICML 2024) as a batched torch env: see :mod:`.env`."""
