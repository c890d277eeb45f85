"""jaxmbd: differentiable constrained multibody dynamics in JAX.

Importing jaxmbd enables float64 (``jax_enable_x64``): the solvers need it.
"""

# first: XLA reads XLA_FLAGS when JAX's backend starts (jaxmbd.compiled.xla_flags sets them), and
# scipy's OpenBLAS its thread count when JAX's first LAPACK call loads it (blas_threads)
from .compiled import xla_flags as _xla_flags  # noqa: F401, I001
from .compiled import blas_threads as _blas_threads  # noqa: F401, I001
from . import _config  # noqa: F401
from . import contact, envs, geometry, integrators, mjcf, models, sensors
from ._results import ILL_CONDITIONED, MAX_ITERATIONS, NONFINITE, RESULTS, SUCCESS
from .analysis import diagnostics
from .analysis.batch import kinematics_batch, simulate_batch, stack_models
from .analysis.initial_state import InitialCorrection, consistent_initial_state
from .analysis.kinematics import kinematics
from .analysis.linearize import Linearization, Modes, linearize, modes
from .analysis.plan import Plan, default_formulation, plan_simulation
from .analysis.simulation import run_plan, simulate
from .analysis.statics import Equilibrium, static_equilibrium
from .build import ModelBuilder
from .compiled.jit import jit
from .constraints.redundancy import REDUNDANCY_RTOL, Redundancy, find_redundancy
from .errors import (
    AdjustmentWarning,
    AssemblyWarning,
    JointSpaceOnlyWarning,
    ModelError,
    ModelFileError,
    RedundancyWarning,
    SolverError,
)
from .forces import BodyState, BodyTorque, GeneralForce, PointForce, SpringDamper, joint_limits
from .forces.bushing import Bushing
from .forces.fluid import FluidForce
from .formulations import RA, RE, RP, AbstractFormulation, get_formulation
from .integrators import (
    THETA_H2,
    AbstractIntegrator,
    BackwardEuler,
    GeneralizedAlpha,
    get_integrator,
    valid_pairs,
)
from .io import load_model, save_model
from .joint_space import equalities, read_sensors
from .joint_space.coverage import joint_space_obstacles
from .lie import hat, so3_exp, so3_log, so3_right_jacobian, vee
from .model import Model, joints, markers
from .model.drivers import Expression
from .model.joints import JointCoordinates
from .model.markers import MarkerMotion
from .newton import AbstractNewton, FullNewton, ModifiedNewton, ReusedNewton
from .newton.line_search import LineSearchNewton
from .sensors import SensorInput, SensorKind, SensorMount, register_sensor_kind
from .solution import Solution
from .viz import plot

__version__ = "0.1.0"

__all__ = [
    "AdjustmentWarning",
    "AssemblyWarning",
    "JointSpaceOnlyWarning",
    "REDUNDANCY_RTOL",
    "Redundancy",
    "RedundancyWarning",
    "find_redundancy",
    "ILL_CONDITIONED",
    "MAX_ITERATIONS",
    "NONFINITE",
    "RA",
    "RE",
    "RESULTS",
    "RP",
    "SUCCESS",
    "THETA_H2",
    "AbstractFormulation",
    "AbstractIntegrator",
    "AbstractNewton",
    "BackwardEuler",
    "FullNewton",
    "LineSearchNewton",
    "GeneralizedAlpha",
    "ModifiedNewton",
    "ReusedNewton",
    "get_integrator",
    "jit",
    "integrators",
    "valid_pairs",
    "default_formulation",
    "Plan",
    "plan_simulation",
    "run_plan",
    "joint_space_obstacles",
    "BodyState",
    "BodyTorque",
    "Expression",
    "GeneralForce",
    "InitialCorrection",
    "JointCoordinates",
    "joints",
    "joint_limits",
    "Model",
    "ModelBuilder",
    "ModelError",
    "ModelFileError",
    "PointForce",
    "Solution",
    "SolverError",
    "SpringDamper",
    "Equilibrium",
    "static_equilibrium",
    "Linearization",
    "MarkerMotion",
    "Modes",
    "linearize",
    "modes",
    "Bushing",
    "FluidForce",
    "consistent_initial_state",
    "contact",
    "diagnostics",
    "equalities",
    "envs",
    "geometry",
    "mjcf",
    "plot",
    "sensors",
    "SensorInput",
    "SensorKind",
    "SensorMount",
    "read_sensors",
    "register_sensor_kind",
    "markers",
    "get_formulation",
    "hat",
    "kinematics",
    "kinematics_batch",
    "load_model",
    "models",
    "save_model",
    "simulate",
    "simulate_batch",
    "so3_exp",
    "so3_log",
    "so3_right_jacobian",
    "stack_models",
    "vee",
]

# Mueller & Terze: SE(3) formulation and Munthe-Kaas RK
from .formulations import SE3  # noqa: E402
from .integrators import MuntheKaas  # noqa: E402

__all__ += ["SE3", "MuntheKaas"]


def _keep_former_module_names() -> None:
    """The modules that moved into packages stay importable by their former names
    (``import jaxmbd.simulation``, ``from jaxmbd.joint_limits import ...``): the package's
    own module is registered under the former name too (the CHANGELOG lists them)."""
    import importlib
    import sys

    for former, now in _FORMER_MODULE_NAMES.items():
        module = importlib.import_module(f"{__name__}.{now}")
        sys.modules.setdefault(f"{__name__}.{former}", module)
        globals().setdefault(former, module)


_FORMER_MODULE_NAMES = {
    "animation": "viz.animation",
    "batch": "analysis.batch",
    "bushing": "forces.bushing",
    "controls_file": "io.controls_file",
    "diagnostics": "analysis.diagnostics",
    "drivers": "model.drivers",
    "equalities": "joint_space.equalities",
    "equations": "constraints.equations",
    "fluid": "forces.fluid",
    "initial_state": "analysis.initial_state",
    "joint_dynamics": "forces.joint_dynamics",
    "joint_limits": "forces.joint_limits",
    "joints": "model.joints",
    "kinematics": "analysis.kinematics",
    "limits_option": "analysis.limits_option",
    "line_search": "newton.line_search",
    "linearize": "analysis.linearize",
    "markers": "model.markers",
    "model_report": "analysis.model_report",
    "plot": "viz.plot",
    "quaternion_joint_dynamics": "forces.quaternion_joint_dynamics",
    "redundancy": "constraints.redundancy",
    "rotations": "lie.rotations",
    "simulation": "analysis.simulation",
    "statics": "analysis.statics",
    "tendon_forces": "tendons.tendon_forces",
    "tendon_sensors": "sensors.tendon_sensors",
}
_keep_former_module_names()
