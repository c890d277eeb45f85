"""The analyses a user calls: simulate, kinematics, statics, linearize and modes,
batches, consistent initial states, diagnostics of a Solution and model reports.
Imports the formulations, integrators and joint space below; nothing imports it but
the environments, files, pictures and the command line."""
