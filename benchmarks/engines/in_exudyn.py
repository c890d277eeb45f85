"""Slider crank, double pendulum and heavy top in Exudyn (redundant coordinates, index-3
implicit solvers).

Every body is an Exudyn rigid body (``mbs.CreateRigidBody``) at the centre of mass with the
reference orientation of the jaxmbd model; the joints are Exudyn joints; Exudyn integrates the
index-3 DAE with its generalized-alpha solver (``DynamicSolverType.GeneralizedAlpha``).

Slider crank: revolute crank-ground about global x at (0, 0.1, 0.12); spherical crank-rod at
the crank pin; rod-slider: a generic joint that locks the three translations and one rotation
(slider x axis, i.e. global x, normal to rod y), i.e. the same "revolute-cylindrical" pair as
jaxmbd's (spherical + DP1); prismatic slider-ground along global x. The crank drive: the
crank node uses Tait-Bryan (Rxyz) rotation coordinates and a velocity-level
``CoordinateConstraint`` holds the rate of its x-rotation coordinate at -2 pi rad/s (Exudyn's
idiom for a constant-speed drive, see its ``universalJoint.py`` example); with the revolute
joint this is the crank angle 2 pi t about -x exactly, with no Python callback in the loop.

Double pendulum: two rods with revolute joints about global x (ground-rod 1 at the origin,
rod 1-rod 2 at (0, 4, 0)); the output is the z coordinate of rod 2's tip (rod 2's body-x point
at +1 m from its centre of mass).

Heavy top: one rigid body (Euler parameters, at its centre of mass pivot + A0 c) on a
spherical joint to the ground at the pivot (``CreateSphericalJoint``, three translations
locked, rotations free), gravity as a body load; the initial velocities are given in the
global frame (Exudyn's convention): omega = A0 omega_bar, v = omega x (A0 c). Output: the
rotation matrix from a ``RotationMatrix`` body sensor (9 entries, row-major).

``settings``: "default" = ``exu.SimulationSettings()`` as constructed (solution file written
every 0.01 s, modified Newton as Exudyn does by default, dense linear solver);
"loose" = "fastest" with Newton relativeTolerance 1e-4 (Exudyn's default is 1e-8);
"fastest" = no solution file, verboseMode 0, dense (EXUdense) or sparse (EigenSparse) linear
solver, modified Newton with one Jacobian update per step (modifiedNewtonJacUpdatePerStep),
which needs ~3 instead of ~7 iterations per step here. Exudyn's fast C++ module
(``sys.exudynFast = True`` before the first ``import exudyn``) is a process-wide choice made
by the caller. In both, one internal sensor (not written to a file)
stores the output every step, which the accuracy measurement needs.
"""

from __future__ import annotations

import atexit
import os
import shutil
import tempfile
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
    ROD1_J,
    ROD1_MASS,
    ROD1_R,
    ROD2_A,
    ROD2_HALF,
    ROD2_J,
    ROD2_MASS,
    ROD2_R,
    ROD_A,
    ROD_C_LOCAL,
    ROD_J,
    ROD_MASS,
    ROD_R,
    SLIDER_A,
    SLIDER_J,
    SLIDER_MASS,
    SLIDER_R,
    TopData,
    slider_crank_initial_velocities,
)

try:
    import exudyn as exu
    import exudyn.itemInterface as eii
    from exudyn.utilities import RigidBodyInertia
except ImportError as err:  # pragma: no cover - depends on the optional extra
    raise ImportError(BENCH_HINT) from err

INTEGRATORS = {
    # name: (solver type, spectral radius, Newmark (beta, gamma) or None)
    "GA": ("GeneralizedAlpha", 0.9, None),  # Exudyn's default: generalized-alpha, rho_inf 0.9
    "Newmark-BE": ("GeneralizedAlpha", None, (0.5, 1.0)),  # 1st order, damped: BE-like
}
SETTINGS = ("default", "fastest", "loose")


def _inertia(mass, inertia):
    """``inertia``: principal moments (3,) or the 3x3 tensor, about the centre of mass."""
    tensor = np.asarray(inertia, dtype=float)
    tensor = np.diag(tensor) if tensor.ndim == 1 else tensor
    return RigidBodyInertia(mass=mass, inertiaTensor=tensor, inertiaTensorAtCOM=True)


def _body(
    mbs,
    r,
    a,
    mass,
    diag,
    node_type=None,
    v=(0.0, 0.0, 0.0),
    omega=(0.0, 0.0, 0.0),
    gravity=GRAVITY,
):
    """``v``, ``omega``: global (Exudyn's convention for CreateRigidBody)."""
    kwargs = {} if node_type is None else {"nodeType": node_type}
    return mbs.CreateRigidBody(
        referencePosition=list(r),
        referenceRotationMatrix=np.asarray(a),
        inertia=_inertia(mass, diag),
        gravity=[float(x) for x in gravity],
        initialVelocity=[float(x) for x in v],
        initialAngularVelocity=[float(x) for x in omega],
        returnDict=True,
        show=False,
        **kwargs,
    )


def _slider_crank(mbs):
    ground = mbs.CreateGround()
    v0, w0 = slider_crank_initial_velocities()
    crank = _body(
        mbs, CRANK_PIVOT, CRANK_A, CRANK_MASS, CRANK_J, exu.NodeType.RotationRxyz, v0[0], w0[0]
    )
    rod = _body(mbs, ROD_R, ROD_A, ROD_MASS, ROD_J, None, v0[1], w0[1])
    slider = _body(mbs, SLIDER_R, SLIDER_A, SLIDER_MASS, SLIDER_J, None, v0[2], w0[2])
    pin = CRANK_PIVOT + CRANK_A @ CRANK_PIN_LOCAL
    mbs.CreateRevoluteJoint(
        bodyNumbers=[ground, crank["bodyNumber"]],
        position=list(CRANK_PIVOT),
        axis=[1.0, 0.0, 0.0],
        useGlobalFrame=True,
        show=False,
    )
    mbs.CreateSphericalJoint(
        bodyNumbers=[crank["bodyNumber"], rod["bodyNumber"]],
        position=list(pin),
        useGlobalFrame=True,
        show=False,
    )
    # rod-slider: 3 translations + the rotation that keeps rod y normal to global x
    m_slider = mbs.AddMarker(
        eii.MarkerBodyRigid(
            bodyNumber=slider["bodyNumber"],
            localPosition=[0.0, 0.0, 0.0],
            localHT=exu.HT(rotation=SLIDER_A.T, translation=[0.0, 0.0, 0.0]),
        )
    )
    m_rod = mbs.AddMarker(
        eii.MarkerBodyRigid(bodyNumber=rod["bodyNumber"], localPosition=list(ROD_C_LOCAL))
    )
    mbs.AddObject(
        eii.ObjectJointGeneric(
            markerNumbers=[m_slider, m_rod],
            constrainedAxes=[1, 1, 1, 0, 0, 1],
            visualization=eii.VObjectJointGeneric(show=False),
        )
    )
    mbs.CreatePrismaticJoint(
        bodyNumbers=[ground, slider["bodyNumber"]],
        position=list(SLIDER_R),
        axis=[1.0, 0.0, 0.0],
        useGlobalFrame=True,
        show=False,
    )
    # drive: rate of the crank's Rxyz x-angle = -2 pi (equation: 0 - q_crank - offset = 0)
    n_ground = mbs.AddNode(eii.NodePointGround(referenceCoordinates=[0.0, 0.0, 0.0]))
    m_angle = mbs.AddMarker(eii.MarkerNodeCoordinate(nodeNumber=crank["nodeNumber"], coordinate=3))
    m_zero = mbs.AddMarker(eii.MarkerNodeCoordinate(nodeNumber=n_ground, coordinate=0))
    mbs.AddObject(
        eii.CoordinateConstraint(
            markerNumbers=[m_angle, m_zero],
            offset=CRANK_SPEED,
            velocityLevel=True,
            visualization=eii.VCoordinateConstraint(show=False),
        )
    )
    return mbs.AddSensor(
        eii.SensorBody(
            bodyNumber=slider["bodyNumber"],
            outputVariableType=exu.OutputVariableType.Position,
            storeInternal=True,
            writeToFile=False,
        )
    )


def _double_pendulum(mbs):
    ground = mbs.CreateGround()
    rod1 = _body(mbs, ROD1_R, ROD1_A, ROD1_MASS, ROD1_J)
    rod2 = _body(mbs, ROD2_R, ROD2_A, ROD2_MASS, ROD2_J)
    for pair, position in (
        ([ground, rod1["bodyNumber"]], [0.0, 0.0, 0.0]),
        ([rod1["bodyNumber"], rod2["bodyNumber"]], [0.0, 4.0, 0.0]),
    ):
        mbs.CreateRevoluteJoint(
            bodyNumbers=pair,
            position=position,
            axis=[1.0, 0.0, 0.0],
            useGlobalFrame=True,
            show=False,
        )
    return mbs.AddSensor(
        eii.SensorBody(
            bodyNumber=rod2["bodyNumber"],
            localPosition=[ROD2_HALF, 0.0, 0.0],
            outputVariableType=exu.OutputVariableType.Position,
            storeInternal=True,
            writeToFile=False,
        )
    )


def _heavy_top(mbs, top: TopData = HEAVY_TOP):
    ground = mbs.CreateGround()
    com = top.A0 @ top.com  # global, from the pivot
    omega = top.A0 @ top.omega0  # body -> global
    body = _body(
        mbs,
        top.pivot + com,
        top.A0,
        top.mass,
        top.inertia,
        v=np.cross(omega, com),
        omega=omega,
        gravity=top.gravity,
    )
    mbs.CreateSphericalJoint(
        bodyNumbers=[ground, body["bodyNumber"]],
        position=[float(x) for x in top.pivot],
        useGlobalFrame=True,
        show=False,
    )
    return mbs.AddSensor(
        eii.SensorBody(
            bodyNumber=body["bodyNumber"],
            outputVariableType=exu.OutputVariableType.RotationMatrix,
            storeInternal=True,
            writeToFile=False,
        )
    )


class ExudynSolveError(RuntimeError):
    """Exudyn did not complete the fixed-step run (see ``ExudynSim.solve``)."""


class ExudynSim:
    """Build once, then ``run()`` solves from the initial state and returns the output.

    ``mechanism``: "slider_crank" (output x of the slider), "double_pendulum" (z of rod 2's
    tip) or "heavy_top" (rotation matrix, shape (T, 3, 3)). ``linear_solver``: "dense"
    (EXUdense) or "sparse" (EigenSparse), only for ``settings="fastest"``. ``top``: the heavy
    top's data (default ``HEAVY_TOP``; e.g. ``top_data(jaxmbd.models.spinning_top())``).
    """

    def __init__(
        self,
        mechanism: str,
        h: float,
        t_end: float,
        integrator: str = "GA",
        settings: str = "fastest",
        linear_solver: str = "dense",
        top: TopData = HEAVY_TOP,
    ):
        self.mechanism, self.h, self.t_end = mechanism, h, t_end
        self.sc = exu.SystemContainer()
        self.mbs = self.sc.AddSystem()
        build = {
            "slider_crank": _slider_crank,
            "double_pendulum": _double_pendulum,
            "heavy_top": lambda mbs: _heavy_top(mbs, top),
        }[mechanism]
        self.sensor = build(self.mbs)
        self.mbs.Assemble()
        self._tmp = tempfile.mkdtemp(prefix="exudyn_bench_")  # default settings write files
        atexit.register(shutil.rmtree, self._tmp, True)
        s = exu.SimulationSettings()
        n_steps = int(round(t_end / h))
        s.timeIntegration.numberOfSteps = n_steps
        s.timeIntegration.endTime = n_steps * h
        s.solution.sensors.writePeriod = h  # the output at every step (internal, no file)
        s.solution.file.name = os.path.join(self._tmp, "coordinatesSolution")
        s.solution.solverInformationFileName = os.path.join(self._tmp, "solverInformation.txt")
        solver_type, rho, newmark = INTEGRATORS[integrator]
        if rho is not None:
            s.timeIntegration.generalizedAlpha.spectralRadius = rho
        if newmark is not None:
            s.timeIntegration.generalizedAlpha.useNewmark = True
            s.timeIntegration.generalizedAlpha.newmarkBeta = newmark[0]
            s.timeIntegration.generalizedAlpha.newmarkGamma = newmark[1]
        if settings in ("fastest", "loose"):
            if settings == "loose":  # the fastest honest setup seen: Newton relTol 1e-4
                s.timeIntegration.newton.relativeTolerance = 1e-4
            s.solution.file.write = False
            s.solution.sensors.active = True
            s.timeIntegration.verboseMode = 0
            s.timeIntegration.newton.useModifiedNewton = True
            s.timeIntegration.newton.modifiedNewtonJacUpdatePerStep = True
            s.timeIntegration.reuseConstantMassMatrix = True
            s.displayStatistics = False
            s.displayComputationTime = False
            s.linearSolver.solverType = {
                "dense": exu.LinearSolverType.EXUdense,
                "sparse": exu.LinearSolverType.EigenSparse,
            }[linear_solver]
        elif settings != "default":
            raise ValueError(f"settings must be one of {SETTINGS}")
        self.settings = s
        self.solver_type = getattr(exu.DynamicSolverType, solver_type)
        self.n_steps = n_steps

    def solve(self) -> float:
        """One solve from the initial state; returns its wall time in seconds.

        Raises ExudynSolveError if Exudyn gives up (Newton fails down to its minimum step) or
        if its adaptive step control took steps other than the n_steps of size h (Exudyn's
        default ``adaptiveStep``): such a run is not a fixed-step-h result."""
        start = time.perf_counter()
        try:
            ok = self.mbs.SolveDynamic(self.settings, solverType=self.solver_type, storeSolver=True)
        except exu.SolverError as err:
            raise ExudynSolveError(f"solver failed ({err})") from err
        elapsed = time.perf_counter() - start
        if not ok:
            raise ExudynSolveError("solver failed")
        taken = self.mbs.sys["dynamicSolver"].it.currentStepIndex - 1
        if taken != self.n_steps:
            raise ExudynSolveError(
                f"adaptive step reduction: {taken} steps instead of {self.n_steps} "
                "(Newton did not converge at the fixed step)"
            )
        return elapsed

    def output(self) -> tuple[np.ndarray, np.ndarray]:
        """(t, y): slider x, rod-2 tip z or the top's rotation matrix from the last solve."""
        data = np.asarray(self.mbs.GetSensorStoredData(self.sensor))
        if self.mechanism == "heavy_top":
            return data[:, 0], data[:, 1:10].reshape(-1, 3, 3)
        column = 1 if self.mechanism == "slider_crank" else 3
        return data[:, 0], data[:, column]

    def run(self) -> tuple[np.ndarray, np.ndarray]:
        self.solve()
        return self.output()
