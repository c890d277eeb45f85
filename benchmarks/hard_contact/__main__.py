"""``python -m benchmarks.hard_contact PART [options]``; ``PART --help`` for each part's."""

from benchmarks._harness import dispatch

dispatch(
    "benchmarks.hard_contact",
    {
        "compare": (
            "compare",
            "against compliant contact and MuJoCo: work-precision, steps/s "
            "against N, gradient cost",
        ),  # fmt: skip
        "batch": ("batch", "simulate_batch with per-member contacts, checked and timed"),
        "relaxation": ("relaxation", "the gradient relaxation's bias against smoothness"),
        "step-parts": ("step_parts", "a step's cost part by part, versions interleaved"),
    },
)
