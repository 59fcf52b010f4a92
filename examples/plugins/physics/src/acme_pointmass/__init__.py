"""Example noeira physics engine ``pointmass``: point masses on slide joints, in torch."""
