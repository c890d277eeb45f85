"""``python -m benchmarks.engines COMPARISON [options]``; ``COMPARISON --help`` for each."""

from benchmarks._harness import dispatch

dispatch(
    "benchmarks.engines",
    {
        "classic": (
            "classic",
            "jaxmbd against Exudyn and MuJoCo C on the built-in slider "
            "crank, double pendulum and heavy top",
        ),  # fmt: skip
        "jax-peers": (
            "jax_peers",
            "jaxmbd against MJX and jaxsim on the same MJCF files: "
            "steps/s, batch, gradients, accuracy",
        ),  # fmt: skip
        "joint-coordinates": (
            "joint_coordinates",
            "jaxmbd's joint formulation against MJX and MuJoCo C on robot files: "
            "steps/s, batch, gradients, compile, accuracy",
        ),  # fmt: skip
        "control": (
            "control",
            "jaxmbd against MJX on dm_control's cartpole and gymnasium's "
            "inverted double pendulum under controls",
        ),  # fmt: skip
    },
)
