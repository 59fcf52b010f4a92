"""Atari 2600 games through the Arcade Learning Environment (``atari:<game>``, extra ``[atari]``
installing ale-py, which ships the ROMs): see :mod:`noeira.envs.atari.env`."""
