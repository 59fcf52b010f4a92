"""gymnasium's MuJoCo v5 environments, batched in torch on any registered physics engine."""
