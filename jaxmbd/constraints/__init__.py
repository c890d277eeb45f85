"""Constraint equations of the absolute formulations: the model's GCON rows
assembled (values, Jacobians, right-hand sides) and redundant rows found and dropped.
Imports the model, the GCON kernels and the linear solvers."""
