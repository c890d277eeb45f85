"""Why ``jaxmbd.tree.poses`` traces into a large program for a deep tree, and how much a
logarithmic composition would save: ``poses`` composes the local frames level by level
(one gather, product and concatenation per tree level: 29 levels for dog.xml's spine and
tail), so its program grows with the depth. A prototype composes them by pointer jumping
instead (each body with its 2^k-th ancestor, ceil(log2(depth)) rounds over all bodies;
the local frames and the motion subspaces as in ``poses``): the jaxpr equations, the
lower + XLA compile time (compilation cache off) and the largest difference of x, R, c, S
(round-off: the products associate differently). Not adopted: it changes the time step's
program, and only deep trees gain.

    JAXMBD_NO_COMPILATION_CACHE=1 python -m benchmarks.probes.tree_pose_depth
"""

import os
import time
import warnings

import dm_control
import jax
import jax.numpy as jnp
import numpy as np

import jaxmbd as mbd
import jaxmbd.tree as T
from jaxmbd.tree import kinematics as K
from jaxmbd.tree._elementwise import mm, mv
from jaxmbd.tree.topology import WORLD


def frames_doubling(tree, qpos):
    nb = tree.nb
    p, Rl, joint_p, joint_R = K.local_frames(tree, qpos)
    anc = np.asarray([nb if a == WORLD else a for a in tree.parent], dtype=int)
    x, R = p, Rl
    eye, zero = jnp.eye(3, dtype=p.dtype)[None], jnp.zeros((1, 3), p.dtype)
    while np.any(anc < nb):
        xe, Re = jnp.concatenate([x, zero]), jnp.concatenate([R, eye])
        Ra = Re[anc]
        x = xe[anc] + mv(Ra, x)
        R = mm(Ra, R)
        anc = np.append(anc, nb)[anc]
    c = x + mv(R, tree.com)
    parent = np.asarray([nb if a == WORLD else a for a in tree.parent], dtype=int)
    S = K._motion_subspaces(tree, x, R, parent, joint_p, joint_R)
    return x, R, c, S


def level_frames(tree, qpos):
    return tuple(T.poses(tree, qpos))


def main() -> None:
    warnings.simplefilter("ignore")
    suite = os.path.join(os.path.dirname(dm_control.__file__), "suite")
    for name in ("dog.xml", "humanoid.xml", "cartpole.xml"):
        tree = mbd.load_model(os.path.join(suite, name)).tree
        q = tree.qpos_init
        print(name, "bodies", tree.nb, "levels", len(tree.levels))
        for label, frames in (("levels", level_frames), ("doubling", frames_doubling)):

            def at(q, frames=frames, tree=tree):
                return frames(tree, q)

            n = len(jax.make_jaxpr(at)(q).jaxpr.eqns)
            start = time.perf_counter()
            jax.jit(at).lower(q).compile()
            print(f"  {label}: {n} equations, lower + compile {time.perf_counter() - start:.2f} s")
        a, b = level_frames(tree, q), frames_doubling(tree, q)
        diffs = [float(jnp.max(jnp.abs(u - v))) for u, v in zip(a, b, strict=True)]
        print("  largest difference of x, R, c, S:", diffs)


if __name__ == "__main__":
    main()
