"""Prescribed functions f(t) of driving constraints, from safely parsed expressions.

An expression such as ``"cos(2*pi*t + pi/2)"`` is parsed with :mod:`ast` against a whitelist
(no ``eval``) into a static program; its numeric literals become an array of parameters, so
``jax.grad`` reaches them (docs/design.md, principle 1). Time derivatives f_dot and f_ddot come from
forward-mode autodiff, never from hand-written strings.
"""

from __future__ import annotations

import ast
import math

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np

from .. import _config  # noqa: F401
from ..compiled.host_arrays import device_array
from ..compiled.jit import RUN_ONCE, jit

_FUNCTIONS = {
    "sin": jnp.sin,
    "cos": jnp.cos,
    "tan": jnp.tan,
    "exp": jnp.exp,
    "log": jnp.log,
    "sqrt": jnp.sqrt,
    "abs": jnp.abs,
    "sinh": jnp.sinh,
    "cosh": jnp.cosh,
    "tanh": jnp.tanh,
    "asin": jnp.arcsin,
    "acos": jnp.arccos,
    "atan": jnp.arctan,
    "arcsin": jnp.arcsin,
    "arccos": jnp.arccos,
    "arctan": jnp.arctan,
}
_NAMED_CONSTANTS = {"pi": math.pi, "e": math.e}
# bounds on an expression: source length and syntax-tree nodes (a driver is a short formula;
# the program is unrolled into every compiled step)
MAX_SOURCE_LENGTH = 2000
MAX_NODES = 200
_BINARY = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "div", ast.Pow: "pow"}


class ExpressionError(ValueError):
    """An f(t) expression that cannot be parsed or uses something outside the whitelist."""


def parse_expression(source: str, *, where: str = "expression") -> tuple[tuple, list[float]]:
    """Parse ``source`` into (program, constants). ``where`` names it in error messages."""
    if not isinstance(source, str):
        raise ExpressionError(f"{where}: expected a string expression in t, got {source!r}")
    shown = source if len(source) <= 80 else source[:77] + "..."
    if len(source) > MAX_SOURCE_LENGTH:
        raise ExpressionError(
            f"{where}: expression of {len(source)} characters {shown!r}; at most "
            f"{MAX_SOURCE_LENGTH} are accepted"
        )
    text = source.strip().replace("^", "**")
    if not text:
        raise ExpressionError(f"{where}: empty expression")
    try:
        tree = ast.parse(text, mode="eval")
    except SyntaxError as err:
        raise ExpressionError(f"{where}: cannot parse {shown!r}: {err.msg}") from None
    except (RecursionError, MemoryError, ValueError):
        raise ExpressionError(f"{where}: expression {shown!r} is nested too deeply") from None
    n_nodes = sum(1 for _ in ast.walk(tree))
    if n_nodes > MAX_NODES:
        raise ExpressionError(
            f"{where}: expression {shown!r} has {n_nodes} syntax nodes; at most {MAX_NODES}"
        )
    constants: list[float] = []

    def build(node):
        if isinstance(node, ast.Constant):
            if isinstance(node.value, bool) or not isinstance(node.value, int | float):
                raise ExpressionError(f"{where}: unsupported literal {node.value!r} in {shown!r}")
            try:
                value = float(node.value)
            except OverflowError:
                value = math.inf
            if not math.isfinite(value):
                raise ExpressionError(f"{where}: literal out of range in {shown!r}")
            constants.append(value)
            return ("const", len(constants) - 1)
        if isinstance(node, ast.Name):
            if node.id == "t":
                return ("t",)
            if node.id in _NAMED_CONSTANTS:
                return ("fixed", _NAMED_CONSTANTS[node.id])
            raise ExpressionError(
                f"{where}: unknown name {node.id!r} in {shown!r}; allowed: t, pi, e and "
                f"functions {sorted(_FUNCTIONS)}"
            )
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            return (_BINARY[type(node.op)], build(node.left), build(node.right))
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
            inner = build(node.operand)
            return ("neg", inner) if isinstance(node.op, ast.USub) else inner
        if isinstance(node, ast.Call):
            name = node.func.id if isinstance(node.func, ast.Name) else None
            if name not in _FUNCTIONS or node.keywords or len(node.args) != 1:
                raise ExpressionError(
                    f"{where}: unsupported call in {shown!r}; allowed one-argument functions: "
                    f"{sorted(_FUNCTIONS)}"
                )
            return ("call", name, build(node.args[0]))
        raise ExpressionError(f"{where}: unsupported syntax {type(node).__name__} in {shown!r}")

    return build(tree.body), constants


def _depends_on_t(program) -> bool:
    if program[0] == "t":
        return True
    return any(isinstance(p, tuple) and _depends_on_t(p) for p in program[1:])


def evaluate_program(program, constants, t):
    """Evaluate a parsed program with parameter vector ``constants`` at time ``t``."""
    op = program[0]
    if op == "t":
        return t
    if op == "const":
        return constants[program[1]]
    if op == "fixed":
        return jnp.asarray(program[1], dtype=jnp.result_type(float))
    if op == "neg":
        return -evaluate_program(program[1], constants, t)
    if op == "call":
        return _FUNCTIONS[program[1]](evaluate_program(program[2], constants, t))
    a = evaluate_program(program[1], constants, t)
    b = evaluate_program(program[2], constants, t)
    if op == "add":
        return a + b
    if op == "sub":
        return a - b
    if op == "mul":
        return a * b
    if op == "div":
        return a / b
    return a**b


#: numpy's counterparts of :data:`_FUNCTIONS` (the same names in numpy)
_HOST_FUNCTIONS = {name: getattr(np, f.__name__) for name, f in _FUNCTIONS.items()}


def _host_value(program, constants):
    """A program of no ``t`` evaluated in numpy float64 (:func:`evaluate_program`'s
    rules)."""
    op = program[0]
    if op == "const":
        return constants[program[1]]
    if op == "fixed":
        return np.float64(program[1])
    if op == "neg":
        return -_host_value(program[1], constants)
    if op == "call":
        return _HOST_FUNCTIONS[program[1]](_host_value(program[2], constants))
    a, b = _host_value(program[1], constants), _host_value(program[2], constants)
    return {"add": np.add, "sub": np.subtract, "mul": np.multiply, "div": np.divide,
            "pow": np.power}[op](a, b)  # fmt: skip


class Expression(eqx.Module):
    """A scalar function f(t) parsed from a string; its numeric literals are parameters."""

    source: str = eqx.field(static=True)
    program: tuple = eqx.field(static=True)
    constants: jax.Array

    def __init__(self, source: str, *, where: str = "expression"):
        program, constants = parse_expression(source, where=where)
        self.source = source
        self.program = program
        self.constants = device_array(
            np.asarray(constants, dtype=np.float64).reshape(len(constants))
        )

    @property
    def is_constant(self) -> bool:
        return not _depends_on_t(self.program)

    def value_at_start(self) -> float:
        """f(0) of an expression of no ``t``, computed on the host (numpy's functions): a
        constant offset needs no compiled program."""
        if not self.is_constant:
            raise ValueError(f"expression {self.source!r} depends on t")
        with np.errstate(all="ignore"):
            return float(_host_value(self.program, np.asarray(self.constants)))

    def check_finite_at_start(self, *, where: str):
        """Refuse an expression whose value, first or second time derivative at t = 0 is not
        finite (``9**9**9``, ``log(-1)``, ``sqrt(t)``): it would enter the solver as inf/NaN."""
        if self.is_constant:  # derivatives zero; the value on the host
            values = [np.asarray([self.value_at_start()]), np.zeros(1), np.zeros(1)]
        else:
            # one compiled program per expression program (the source text left out of the
            # key)
            constants = device_array(np.asarray(self.constants)[None])
            group = DriverGroup(rows=(0,), program=self.program, sources=("",),
                                constants=constants)  # fmt: skip
            values = [np.asarray(v) for v in _start_derivatives(group)]
        bad = [
            name
            for name, v in zip(("f", "f_dot", "f_ddot"), values, strict=True)
            if not np.isfinite(v[0])
        ]
        if bad:
            shown = self.source if len(self.source) <= 80 else self.source[:77] + "..."
            raise ExpressionError(
                f"{where}: {shown!r} gives a non-finite {', '.join(bad)} at t = 0 "
                f"(values {[float(v[0]) for v in values]})"
            )

    def __call__(self, t):
        return evaluate_program(self.program, self.constants, t)


class DriverGroup(eqx.Module):
    """Constraint rows whose f(t) share one program; evaluated in one vectorised call."""

    rows: tuple[int, ...] = eqx.field(static=True)
    program: tuple = eqx.field(static=True)
    sources: tuple[str, ...] = eqx.field(static=True)
    constants: jax.Array  # (len(rows), n_constants)

    def __call__(self, t):
        return jax.vmap(lambda c: evaluate_program(self.program, c, t))(self.constants)


def group_drivers(row_expressions: dict[int, Expression]) -> tuple[DriverGroup, ...]:
    """Group time-dependent expressions by program so the trace grows with distinct programs."""
    by_program: dict[tuple, list[tuple[int, Expression]]] = {}
    for row, expr in sorted(row_expressions.items()):
        by_program.setdefault(expr.program, []).append((row, expr))
    groups = []
    for program, members in by_program.items():
        n_const = members[0][1].constants.shape[0]
        constants = device_array(
            np.stack([np.asarray(e.constants) for _, e in members]).reshape(len(members), n_const)
        )
        groups.append(
            DriverGroup(
                rows=tuple(r for r, _ in members),
                program=program,
                sources=tuple(e.source for _, e in members),
                constants=constants,
            )
        )
    return tuple(groups)


@jit(xla_options=RUN_ONCE)  # of the disk cache (a new process does not trace it)
def _start_derivatives(group: DriverGroup):
    """(f, f_dot, f_ddot) of one group's row at t = 0 (:meth:`Expression.check_finite_at_start`)."""
    return driver_derivatives(jnp.zeros(1), (group,), 0.0)


def driver_values(offsets, groups: tuple[DriverGroup, ...], t):
    """f(t) for every constraint row: constant offsets plus the time-dependent groups."""
    f = offsets
    n = np.shape(offsets)[0]
    for group in groups:  # one iteration per distinct program, not per constraint
        # a gather with static indices, not a scatter-add: XLA's CPU scatter is a loop of
        # single-element updates, and under vmap a loop over the batch members too
        position = np.zeros(n, dtype=np.int32)
        position[np.asarray(group.rows)] = np.arange(len(group.rows))
        driven = np.zeros(n, dtype=bool)
        driven[np.asarray(group.rows)] = True
        f = f + jnp.where(driven, group(t)[position], 0.0)
    return f


#: :func:`driver_values` as one compiled program (per set of driver programs): build-time
#: values (:func:`jaxmbd.constraints.redundancy.find_redundancy`) without compiling op by op.
compiled_driver_values = jit(driver_values)


def driver_derivatives(offsets, groups, t):
    """(f, f_dot, f_ddot) of every row at time t, by nested forward-mode autodiff."""
    t = jnp.asarray(t, dtype=jnp.float64)

    def f(s):
        return driver_values(offsets, groups, s)

    def f_and_fdot(s):
        return jax.jvp(f, (s,), (jnp.ones_like(s),))

    (value, first), (_, second) = jax.jvp(f_and_fdot, (t,), (jnp.ones_like(t),))
    return value, first, second


def check_expression_derivative(
    expr: Expression, claimed: str, order: int, *, where: str, times=None
) -> float:
    """Largest difference between autodiff d^order f/dt^order and a claimed expression."""
    claimed_expr = Expression(claimed, where=where)
    fn = expr
    for _ in range(order):
        fn = jax.grad(fn)
    times = np.linspace(0.0, 2.0, 9) if times is None else times
    ts = jnp.asarray(times, dtype=jnp.float64)
    ours = jax.vmap(fn)(ts)
    theirs = jax.vmap(claimed_expr)(ts)
    return float(jnp.max(jnp.abs(ours - theirs)))


def program_to_source(program, constants) -> str:
    """Source text of a program with the current parameter values (for saving models)."""
    op = program[0]
    if op == "t":
        return "t"
    if op == "const":
        return repr(float(constants[program[1]]))
    if op == "fixed":
        return {math.pi: "pi", math.e: "e"}.get(program[1], repr(program[1]))
    if op == "neg":
        return f"(-{program_to_source(program[1], constants)})"
    if op == "call":
        return f"{program[1]}({program_to_source(program[2], constants)})"
    sym = {"add": "+", "sub": "-", "mul": "*", "div": "/", "pow": "**"}[op]
    left = program_to_source(program[1], constants)
    right = program_to_source(program[2], constants)
    return f"({left} {sym} {right})"
