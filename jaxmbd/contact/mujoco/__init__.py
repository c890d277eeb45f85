"""MuJoCo's narrow phase in JAX: one kernel per geom-type pair giving the contacts `mj_collision`
gives (dist, pos, frame), in fixed slots with a validity mask, the table that maps MuJoCo's
geom types to kernels, and the geom pairs that `mj_collision` tests for an mjModel."""

from .common import Contacts, make_frame
from .pairs import KERNELS, candidate_pairs, collide, kernel_for

__all__ = ["KERNELS", "Contacts", "candidate_pairs", "collide", "kernel_for", "make_frame"]
