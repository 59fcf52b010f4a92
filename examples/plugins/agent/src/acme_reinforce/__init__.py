"""Example noeira agent ``reinforce``: Monte Carlo policy gradient, the whole loop on the device."""
