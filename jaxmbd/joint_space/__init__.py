"""The ``"joint"`` formulation: a model's kinematic tree in joint coordinates, with its force
elements, loop-closing constraints and time steps."""
