"""Exact contact (``contact="hard"``): one study, four parts, one entry point.

    python -m benchmarks.hard_contact compare ...     # against compliant contact and MuJoCo
    python -m benchmarks.hard_contact batch ...       # simulate_batch, checked per member
    python -m benchmarks.hard_contact relaxation ...  # the gradient relaxation's bias
    python -m benchmarks.hard_contact step-parts ...  # one step's cost, part by part

The scenes (ball, cube, incline block, box stack) are in ``benchmarks/problems.py``.
"""
