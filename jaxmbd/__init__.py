"""jaxmbd: differentiable constrained multibody dynamics in JAX.

Importing jaxmbd enables float64 (``jax_enable_x64``): the solvers need it.
"""

# first: XLA reads XLA_FLAGS when JAX's backend starts (jaxmbd._xla_flags sets them), and
# scipy's OpenBLAS its thread count when JAX's first LAPACK call loads it (_blas_threads)
from . import _xla_flags  # noqa: F401, I001
from . import _blas_threads  # noqa: F401, I001
from . import (
    _config,  # noqa: F401
    contact,
    diagnostics,
    equalities,
    envs,
    geometry,
    integrators,
    joint_limits,
    joints,
    markers,
    mjcf,
    models,
    plot,
    sensors,
)
from ._jit import jit
from ._results import RESULTS
from .batch import kinematics_batch, simulate_batch, stack_models
from .build import ModelBuilder
from .bushing import Bushing
from .drivers import Expression
from .fluid import FluidForce
from .errors import (
    AdjustmentWarning,
    AssemblyWarning,
    JointSpaceOnlyWarning,
    ModelError,
    ModelFileError,
    RedundancyWarning,
    SolverError,
)
from .forces import BodyState, BodyTorque, GeneralForce, PointForce, SpringDamper
from .formulations import RA, RE, RP, AbstractFormulation, get_formulation
from .initial_state import InitialCorrection, consistent_initial_state
from .integrators import (
    THETA_H2,
    AbstractIntegrator,
    BackwardEuler,
    GeneralizedAlpha,
    get_integrator,
    valid_pairs,
)
from .io import load_model, save_model
from .joint_space import read_sensors
from .joint_space.coverage import joint_space_obstacles
from .joints import JointCoordinates
from .kinematics import kinematics
from .lie import hat, so3_exp, so3_log, so3_right_jacobian, vee
from .line_search import LineSearchNewton
from .linearize import Linearization, Modes, linearize, modes
from .markers import MarkerMotion
from .model import Model
from ._results import ILL_CONDITIONED, MAX_ITERATIONS, NONFINITE, SUCCESS
from .newton import AbstractNewton, FullNewton, ModifiedNewton, ReusedNewton
from .redundancy import REDUNDANCY_RTOL, Redundancy, find_redundancy
from .sensors import SensorInput, SensorKind, SensorMount, register_sensor_kind
from .simulation import default_formulation, simulate
from .solution import Solution
from .statics import Equilibrium, static_equilibrium

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
