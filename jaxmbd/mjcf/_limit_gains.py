"""The compliant limit's stiffness and damping that stand for a MuJoCo joint limit's soft
constraint (its ``solref`` and ``solimp``).

**MuJoCo's law** (documentation, Computation → Soft constraints; ``mj_makeImpedance`` and
``getimpedance`` in ``engine_core_constraint.c``). A limit row with penetration r >= 0,
rate v = dr/dt, impedance d = d(r) from ``solimp = (d_min, d_max, width, midpoint,
power)`` and reference acceleration a_ref = -b v - k d r, where for ``solref = (tc, zeta)``
(tc at least twice the time step unless ``refsafe`` is disabled)

    k = 1 / (d_max^2 tc^2 zeta^2),   b = 2 / (d_max tc)

and for ``solref = (-K, -B)`` (direct form) k = K / d_max^2, b = B / d_max. The row's
regulariser is R = (1 - d) / d · A0 with A0 = ``dof_invweight0`` of the joint's dof (the
diagonal of M^-1 at ``qpos0``, armature included). One active row with constraint-space
inverse inertia A gets the force f = (a_ref - a0) / (A + R), with a0 the acceleration
without it: its acceleration is a1 = a0 + A f.

**Equivalent spring-damper.** Where A = A0 this is exactly a spring K' = d k / ((1-d) A0),
a damper C' = d b / ((1-d) A0) and an added inertia d / ((1-d) A0) while the limit is
penetrated: a1 = (1-d) a0 - d b v - d^2 k r. A force element cannot add inertia, so the
mapping keeps what the joint shows at rest and the character of its impacts:

* stiffness K = d^2 k_s / ((1 - d) A0), k_s = k / d: at rest (a1 = 0, v = 0) MuJoCo's
  penetration is r = f (1 - d) A0 / (d^2 k_s), that of the spring f / K, equal for any
  inertia A (the rest state does not involve it);
* damping C = d b / (sqrt(1 - d) A0): the damping ratio C / (2 sqrt(K I)) on the joint's
  inertia I = 1 / A0 equals that of MuJoCo's spring, damper and inertia, zeta
  (b / (2 sqrt(k_s)) in the direct form), so impacts rebound alike.

The gains returned are those at r = 0, d = d_min (clipped to [1e-4, 0.9999] as MuJoCo
does); the importer also hands ``solimp`` to :class:`jaxmbd.forces.joint_limits.JointLimits`
(``impedance``), which scales them with d(r) as the formulas above (MuJoCo stiffens by up
to K(d_max) / K(d_min) = 2.2 beyond ``width`` with the default ``solimp``). Because the
spring acts on the joint's own inertia 1 / A0 instead of MuJoCo's 1 / ((1-d) A0) during
penetration, an impact lasts sqrt(1 - d) (0.22 to 0.32 with the default ``solimp``) as
long as MuJoCo's and penetrates about as much less, with the same damping ratio; the motion
away from the limit is MuJoCo's. A0 at ``qpos0`` is MuJoCo's choice too; the rest state
does not depend on the inertia at the current pose.
"""

from __future__ import annotations

import numpy as np

#: MuJoCo's clamp of the impedance (mjMINIMP, mjMAXIMP).
IMPEDANCE_RANGE = (1e-4, 0.9999)


def limit_gains(m, j: int) -> tuple[float, float]:
    """(stiffness, damping) of the compliant limit standing for MuJoCo joint ``j``'s limit
    in the compiled model ``m`` (qpos units; see the module docstring)."""
    import mujoco

    solref = np.asarray(m.jnt_solref[j], dtype=float)
    solimp = np.asarray(m.jnt_solimp[j], dtype=float)
    d_min, d_max = (float(np.clip(x, *IMPEDANCE_RANGE)) for x in solimp[:2])
    if solref[0] > 0:
        tc, zeta = float(solref[0]), float(solref[1])
        if not int(m.opt.disableflags) & int(mujoco.mjtDisableBit.mjDSBL_REFSAFE):
            tc = max(tc, 2.0 * float(m.opt.timestep))
        k_s = 1.0 / (d_max**2 * tc**2 * zeta**2)
        b = 2.0 / (d_max * tc)
    else:
        k_s = -float(solref[0]) / d_max**2
        b = -float(solref[1]) / d_max
    inertia = 1.0 / float(m.dof_invweight0[m.jnt_dofadr[j]])
    d = d_min
    stiffness = inertia * d**2 * k_s / (1.0 - d)
    damping = inertia * d * b / np.sqrt(1.0 - d)
    return stiffness, float(damping)
