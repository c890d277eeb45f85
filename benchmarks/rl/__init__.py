"""Trainers over brax-style environments: evolution strategies (``es``), PPO (``ppo``) and
analytic policy gradients (``apg``), each a CLI (``python -m benchmarks.rl.NAME``), and the
time-to-return comparison of jaxmbd's environments with MJX's (``time_to_return``)."""

try:  # first where it is installed: it sets XLA's CPU options before JAX's backend starts
    import jaxmbd  # noqa: F401
except ImportError:  # MJX's environment
    pass
