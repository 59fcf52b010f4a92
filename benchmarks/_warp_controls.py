"""Warp kernels for ``physics.py``'s warp-raw row: controls drawn anew at every replay of a
Warp graph, as the env rows draw actions every step. A separate module, imported only when
Warp is: Warp reads kernel annotations as objects, not as postponed strings."""

import warp as wp


@wp.kernel
def draw_controls(ctrl: wp.array2d(dtype=float), seed: wp.array(dtype=int), low: float, high: float):
    """``ctrl[i, j]`` uniform in ``[low, high)``, from the stream ``seed[0]``."""
    i, j = wp.tid()
    rng = wp.rand_init(seed[0], i * ctrl.shape[1] + j)
    ctrl[i, j] = wp.randf(rng, low, high)


@wp.kernel
def advance_seed(seed: wp.array(dtype=int)):
    """The next replay draws other values."""
    seed[0] = seed[0] + 1
