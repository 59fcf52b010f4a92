"""A memory suite: batched torch envs that a policy can solve only by remembering, modeled on
POPGym's diagnostic tasks (Morad et al., ICLR 2023) and the T-maze (Bakker, NIPS 2001).

Registry names (entry points ``noeira.envs``), each with one option setting how far back the
policy must remember (``memory_steps``), from a few steps to 64 and more:

==================  =====================================================  ===================
name                the task                                               memory option
==================  =====================================================  ===================
``repeat-first``    name the symbol shown at the first step, every step    ``length``
``repeat-previous`` name the symbol shown ``k`` steps ago                  ``k``
``count-recall``    say how often the queried symbol has been dealt        ``length``
``t-maze``          walk a corridor, turn the way a cue at the start said  ``length``
``autoencode``      watch a sequence, then recite it backwards             ``length``
==================  =====================================================  ===================

Observations are ``Box(0, 1)`` float vectors (one-hot symbols and flags), actions
``Discrete``. Each env's docstring gives its spaces and rewards. Every episode's return lies in
``[-1, 1]`` (as POPGym's; ``t-maze``: ``[0, 1]``): ``env.best_return`` is what a perfect memory earns (1), and
``env.chance_return`` the best expected return of a policy that sees only the current
observation (it cannot remember), so a result reads as where it lies between the two. Each
reports ``episode_accuracy``: the fraction of the episode's answers that were right
(``1 / symbols`` by guessing).

All are capture-safe (fixed shapes, draws from the env's device generator, resets by
``torch.where``), run on cpu and cuda, and keep their state as a dict of ``[N, ...]`` tensors.
"""

from noeira.envs.memory._base import MemoryEnv
from noeira.envs.memory.autoencode import Autoencode
from noeira.envs.memory.count_recall import CountRecall
from noeira.envs.memory.repeat import RepeatFirst, RepeatPrevious
from noeira.envs.memory.t_maze import TMaze

__all__ = ["Autoencode", "CountRecall", "MemoryEnv", "RepeatFirst", "RepeatPrevious", "TMaze"]
