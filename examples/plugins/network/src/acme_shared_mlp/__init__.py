"""Example noeira policy network ``shared-mlp``: one MLP trunk shared by every head."""
