"""noeira physics engines: MuJoCo on CPU threads (``mujoco``) and MuJoCo Warp (``mujoco-warp``).

Both load an MJCF model for ``num_worlds`` worlds and expose the state as torch tensors
``[num_worlds, ...]``; ask for them by name with ``noeira.core.make_physics``.
"""
