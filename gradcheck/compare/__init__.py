"""Two runs -> ``model.Comparison``: where they part, and the likely cause.

``runs.compare_runs`` takes two loaded runs; ``matching`` pairs their parameter names; ``causes``
names the likely cause of the difference.
"""
