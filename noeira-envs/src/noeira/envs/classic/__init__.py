"""Classic-control envs as batched torch programs, exact to gymnasium's references.

Registry names (entry points ``noeira.envs``): ``cartpole`` (CartPole-v1), ``pendulum``
(Pendulum-v1), ``acrobot`` (Acrobot-v1), ``mountaincar`` (MountainCar-v0),
``mountaincar-continuous`` (MountainCarContinuous-v0). Build them with
``noeira.core.make_env(name, num_envs, backend, seed, **config)``.
"""
