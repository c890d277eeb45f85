"""Slider crank, double pendulum and heavy top in MuJoCo (reduced coordinates, soft loop closure).

Bodies carry the jaxmbd masses and principal inertias (``<inertial diaginertia>`` in the body
frame, which is the jaxmbd body frame at t = 0). No geoms, contacts disabled.

Slider crank tree: world -> crank (hinge about global x at the pivot); world -> slider (slide
along global x) -> rod (two hinges at the slider point C: about global x, then about the
rod's own y axis: the universal pair that jaxmbd's spherical + DP1 "revolute-cylindrical"
joint leaves free). The loop crank pin - rod end B is closed by ``<equality><connect>``, a
soft constraint (solref/solimp); its violation |B_crank - B_rod| is reported. 4 joint
coordinates, 3 loop equations, 1 degree of freedom, which the drive takes.

Crank drive ("flywheel"): the crank hinge gets ``armature`` = 1e6 kg m^2 and the initial rate
-2 pi rad/s. The loop reactions (< 1 N m) then change the crank rate by ~1e-9 relative, so
the crank angle is 2 pi t to ~1e-9 rad with no control input, for every integrator
(Euler, implicitfast, RK4). Alternatives and why they were not used: a position or velocity
servo (``<position>``/``<velocity>`` actuator) acting on the crank's small inertia
(1e-4 kg m^2 plus the reflected rod/slider inertia) is stable with Euler and RK4 only for
gains kp < ~100 N m/rad, kv < ~0.1 N m s/rad at h = 1e-3, which leaves a tracking error of
~1e-2 rad; a ``<joint>`` equality to a moving target needs eq_data updated from Python every
step and lags by ~2 * timeconst * 2 pi (soft constraint without velocity feed-forward).

Double pendulum tree: world -> rod 1 (hinge about global x at the origin) -> rod 2 (hinge
about global x at (0, 4, 0)); output: z of rod 2's tip (body-x point +1 m from its centre of
mass), from a ``framepos`` sensor.

Heavy top: world -> top, a body whose frame is at the pivot with the orientation A0, one
``ball`` joint at its origin (reduced coordinates: a quaternion, no constraint), the mass and
the full inertia about the centre of mass (``<inertial pos=c fullinertia=...>``, body axes).
MuJoCo's ball-joint qvel is the angular velocity in the body (joint-local) frame, which is
jaxmbd's omega0 as is. Output: the rotation matrix of a site at the body origin
(``framexaxis``/``frameyaxis``/``framezaxis`` = its columns), i.e. the body frame, not
MuJoCo's principal-axis inertial frame.

Runs use ``mujoco.rollout.rollout`` (the whole trajectory in C, sensors recorded every step).
Sensor values of step k are computed in mj_forward at t_k = k h (before the update).
"""

from __future__ import annotations

import time

import numpy as np

from benchmarks.engines import (
    BENCH_HINT,
    CRANK_A,
    CRANK_J,
    CRANK_MASS,
    CRANK_PIN_LOCAL,
    CRANK_PIVOT,
    CRANK_SPEED,
    GRAVITY,
    HEAVY_TOP,
    ROD1_A,
    ROD1_HALF,
    ROD1_J,
    ROD1_MASS,
    ROD1_R,
    ROD2_A,
    ROD2_HALF,
    ROD2_J,
    ROD2_MASS,
    ROD2_R,
    ROD_A,
    ROD_B_LOCAL,
    ROD_C_LOCAL,
    ROD_J,
    ROD_MASS,
    ROD_R,
    SLIDER_J,
    SLIDER_MASS,
    SLIDER_R,
    TopData,
    slider_crank_initial_velocities,
)

try:
    import mujoco
    from mujoco import rollout
except ImportError as err:  # pragma: no cover - depends on the optional extra
    raise ImportError(BENCH_HINT) from err

INTEGRATORS = ("Euler", "implicitfast", "RK4")
FLYWHEEL_ARMATURE = 1e6  # kg m^2 on the crank hinge (ideal speed source, see module doc)


def _vec(v) -> str:
    return " ".join(f"{float(x):.17g}" for x in v)


def _quat(a: np.ndarray) -> str:
    quat = np.zeros(4)
    mujoco.mju_mat2Quat(quat, np.ascontiguousarray(a, dtype=float).ravel())
    return _vec(quat)


def _header(name: str, h: float, integrator: str, gravity=GRAVITY) -> str:
    return (
        f'<mujoco model="{name}">\n'
        f'  <option timestep="{h:.17g}" gravity="{_vec(gravity)}" integrator="{integrator}">\n'
        '    <flag contact="disable"/>\n'
        "  </option>\n"
    )


def slider_crank_xml(h: float, integrator: str, solref: tuple[float, float] | None = None) -> str:
    e_x = np.array([1.0, 0.0, 0.0])
    rod_pos = ROD_R - SLIDER_R  # slider body has the world orientation
    solref_attr = "" if solref is None else f' solref="{_vec(solref)}"'
    return (
        _header("slider_crank", h, integrator) + "  <worldbody>\n"
        f'    <body name="crank" pos="{_vec(CRANK_PIVOT)}" quat="{_quat(CRANK_A)}">\n'
        f'      <inertial pos="0 0 0" mass="{CRANK_MASS}" diaginertia="{_vec(CRANK_J)}"/>\n'
        f'      <joint name="crank" type="hinge" axis="{_vec(CRANK_A.T @ e_x)}"'
        f' armature="{FLYWHEEL_ARMATURE:g}"/>\n'
        f'      <site name="pin_crank" pos="{_vec(CRANK_PIN_LOCAL)}"/>\n'
        "    </body>\n"
        f'    <body name="slider" pos="{_vec(SLIDER_R)}">\n'
        f'      <inertial pos="0 0 0" mass="{SLIDER_MASS}" diaginertia="{_vec(SLIDER_J)}"/>\n'
        '      <joint name="slide" type="slide" axis="1 0 0"/>\n'
        '      <site name="slider" pos="0 0 0"/>\n'
        f'      <body name="rod" pos="{_vec(rod_pos)}" quat="{_quat(ROD_A)}">\n'
        f'        <inertial pos="0 0 0" mass="{ROD_MASS}" diaginertia="{_vec(ROD_J)}"/>\n'
        f'        <joint name="rod_x" type="hinge" pos="{_vec(ROD_C_LOCAL)}"'
        f' axis="{_vec(ROD_A.T @ e_x)}"/>\n'
        f'        <joint name="rod_y" type="hinge" pos="{_vec(ROD_C_LOCAL)}" axis="0 1 0"/>\n'
        f'        <site name="pin_rod" pos="{_vec(ROD_B_LOCAL)}"/>\n'
        "      </body>\n"
        "    </body>\n"
        "  </worldbody>\n"
        "  <equality>\n"
        f'    <connect body1="crank" body2="rod" anchor="{_vec(CRANK_PIN_LOCAL)}"{solref_attr}/>\n'
        "  </equality>\n"
        "  <sensor>\n"
        '    <framepos objtype="site" objname="slider"/>\n'
        '    <framepos objtype="site" objname="pin_crank"/>\n'
        '    <framepos objtype="site" objname="pin_rod"/>\n'
        "  </sensor>\n"
        "</mujoco>\n"
    )


def double_pendulum_xml(h: float, integrator: str) -> str:
    e_x = np.array([1.0, 0.0, 0.0])
    rel_pos = ROD1_A.T @ (ROD2_R - ROD1_R)
    rel_rot = ROD1_A.T @ ROD2_A
    return (
        _header("double_pendulum", h, integrator) + "  <worldbody>\n"
        f'    <body name="rod1" pos="{_vec(ROD1_R)}" quat="{_quat(ROD1_A)}">\n'
        f'      <inertial pos="0 0 0" mass="{ROD1_MASS}" diaginertia="{_vec(ROD1_J)}"/>\n'
        f'      <joint name="j1" type="hinge" pos="{-ROD1_HALF} 0 0"'
        f' axis="{_vec(ROD1_A.T @ e_x)}"/>\n'
        f'      <body name="rod2" pos="{_vec(rel_pos)}" quat="{_quat(rel_rot)}">\n'
        f'        <inertial pos="0 0 0" mass="{ROD2_MASS}" diaginertia="{_vec(ROD2_J)}"/>\n'
        f'        <joint name="j2" type="hinge" pos="{-ROD2_HALF} 0 0"'
        f' axis="{_vec(ROD2_A.T @ e_x)}"/>\n'
        f'        <site name="tip" pos="{ROD2_HALF} 0 0"/>\n'
        "      </body>\n"
        "    </body>\n"
        "  </worldbody>\n"
        "  <sensor>\n"
        '    <framepos objtype="site" objname="tip"/>\n'
        "  </sensor>\n"
        "</mujoco>\n"
    )


def heavy_top_xml(h: float, integrator: str, top: TopData = HEAVY_TOP) -> str:
    j = np.asarray(top.inertia, dtype=float)
    full = (j[0, 0], j[1, 1], j[2, 2], j[0, 1], j[0, 2], j[1, 2])
    return (
        _header("heavy_top", h, integrator, top.gravity) + "  <worldbody>\n"
        f'    <body name="top" pos="{_vec(top.pivot)}" quat="{_quat(top.A0)}">\n'
        f'      <inertial pos="{_vec(top.com)}" mass="{top.mass!r}" fullinertia="{_vec(full)}"/>\n'
        '      <joint name="ball" type="ball"/>\n'
        '      <site name="frame" pos="0 0 0"/>\n'
        "    </body>\n"
        "  </worldbody>\n"
        "  <sensor>\n"
        '    <framexaxis objtype="site" objname="frame"/>\n'
        '    <frameyaxis objtype="site" objname="frame"/>\n'
        '    <framezaxis objtype="site" objname="frame"/>\n'
        "  </sensor>\n"
        "</mujoco>\n"
    )


class MujocoSim:
    """``run()`` rolls out round(t_end / h) steps from the initial state.

    ``output()`` gives (t, y) with y the slider x, rod 2's tip z or the top's rotation matrix
    (T, 3, 3), and for the slider crank ``loop_violation()`` the distance between the two
    sides of the connect constraint. ``solref``: None = MuJoCo's default (0.02, 1); e.g.
    (2 h, 1) for a stiffer loop. ``top``: the heavy top's data (default ``HEAVY_TOP``).
    """

    def __init__(
        self,
        mechanism: str,
        h: float,
        t_end: float,
        integrator: str = "implicitfast",
        solref: tuple[float, float] | None = None,
        top: TopData = HEAVY_TOP,
    ):
        if integrator not in INTEGRATORS:
            raise ValueError(f"integrator must be one of {INTEGRATORS}")
        self.mechanism, self.h = mechanism, h
        if mechanism == "slider_crank":
            xml = slider_crank_xml(h, integrator, solref)
        elif mechanism == "heavy_top":
            xml = heavy_top_xml(h, integrator, top)
        else:
            xml = double_pendulum_xml(h, integrator)
        self.model = mujoco.MjModel.from_xml_string(xml)
        self.data = mujoco.MjData(self.model)
        if mechanism == "slider_crank":
            v0, w0 = slider_crank_initial_velocities()
            rod_w = w0[1]
            rod_y = ROD_A[:, 1]
            # rod angular velocity = a e_x + b rod_y (e_x and rod_y are orthogonal)
            self.data.qvel[:] = [-CRANK_SPEED, v0[2][0], rod_w[0], rod_w @ rod_y]
        elif mechanism == "heavy_top":
            self.data.qvel[:] = top.omega0  # ball joint: body-frame angular velocity
        mujoco.mj_forward(self.model, self.data)
        spec = mujoco.mjtState.mjSTATE_FULLPHYSICS
        self.state0 = np.zeros(mujoco.mj_stateSize(self.model, spec))
        mujoco.mj_getState(self.model, self.data, self.state0, spec)
        # one step more than round(t_end/h): the sensors of step k are at t_k = k h
        self.n_steps = int(round(t_end / h))
        self.sensordata = None

    def solve(self) -> float:
        """One rollout of n_steps + 1 steps; returns its wall time in seconds. ``unstable``
        afterwards: MuJoCo met a NaN/Inf/huge acceleration (mjWARN_BADQACC) and reset the
        state mid-run, so the output is not a trajectory."""
        badqacc = self.data.warning[mujoco.mjtWarning.mjWARN_BADQACC]
        badqacc.number = 0
        start = time.perf_counter()
        _, sensordata = rollout.rollout(
            self.model, self.data, self.state0[None], nstep=self.n_steps + 1
        )
        elapsed = time.perf_counter() - start
        self.sensordata = sensordata[0]
        self.unstable = badqacc.number > 0
        return elapsed

    def output(self) -> tuple[np.ndarray, np.ndarray]:
        t = self.h * np.arange(self.n_steps + 1)
        if self.mechanism == "heavy_top":  # sensors: the columns of A
            return t, np.asarray(self.sensordata[:, 0:9]).reshape(-1, 3, 3).transpose(0, 2, 1)
        column = 0 if self.mechanism == "slider_crank" else 2
        return t, np.asarray(self.sensordata[:, column])

    def loop_violation(self) -> np.ndarray:
        """|crank pin - rod end B| over time (slider crank only)."""
        return np.linalg.norm(self.sensordata[:, 3:6] - self.sensordata[:, 6:9], axis=1)

    def run(self) -> tuple[np.ndarray, np.ndarray]:
        self.solve()
        return self.output()
