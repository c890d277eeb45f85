"""Compiling jaxmbd's own programs: ``eqx.filter_jit`` with XLA options at top level.

jaxmbd's programs are many small fusions (3x3 rotations, a few dozen unknowns). On the CPU
backend XLA's older elemental emitters compile them about 40% faster than its default
fusion emitters, at the same run time (measured on 2 CPU cores, jax 0.10.2: slider crank,
gen_alpha, 1 s at h = 1e-3: XLA compilation of the run 4.7-5.0 s -> 2.8-3.4 s, of the
consistent start 3.0-3.2 s -> 1.4-1.6 s; per-step time and batched throughput unchanged
within the machine's noise). XLA accepts compiler options only on a top-level jit, so
:func:`jit` compiles with them when called outside any transformation and without them
under one (where the enclosing jit compiles the program anyway).

Its arguments' plain Python functions that close over arrays (``policy=lambda t, obs:
net(obs)``, with ``net`` the parameters being optimised) are passed as their code (static)
and their closed-over values (traced leaves) instead of as one static object: a function
is hashed by identity, and a new closure per call would compile a new program per call.
That is exactly an un-jitted ``jax.value_and_grad(loss)`` in an optimisation loop: each call
of ``loss`` builds a new closure over new tracers, and each compiled the whole simulation
again (tens of seconds per iteration, against none once compiled)."""

from __future__ import annotations

import contextlib
import functools
import types

import equinox as eqx
import jax
import jax.numpy as jnp

from .program_cache import NOT_STORED, cached, remembered

try:  # not public API: without it, options are never used (always safe)
    from jax._src.core import trace_state_clean as _at_top_level
except ImportError:  # pragma: no cover
    _at_top_level = None

#: XLA options of jaxmbd's top-level programs (see the module docstring).
XLA_OPTIONS = {"xla_cpu_use_fusion_emitters": False}

#: XLA options of the programs that run once per model or per run (a model's kinematic
#: tree, its consistent start, the start's checks), added to :data:`XLA_OPTIONS`: the
#: machine code unoptimised, whose compile is what such a program costs (the slider
#: crank's consistent start 6.3 -> 2.7-4.1 s, a double pendulum's tree 1.7 -> 1.1 s, on
#: the loaded 2-core CPU; ``JAXMBD_NO_COMPILATION_CACHE=1``, one process per compile).
#: The arithmetic is the same (no fast-math at any level).
RUN_ONCE = {"xla_backend_optimization_level": 0, "xla_llvm_disable_expensive_passes": True}


@functools.cache
def _options_accepted(extra: tuple = ()) -> bool:
    """Whether this XLA knows the options, ``XLA_OPTIONS`` and the ``extra`` (key, value)
    pairs of a :func:`jit` given ``xla_options`` (a tiny compile, once per machine and set
    of options: the answer is kept with the cached programs)."""
    if _at_top_level is None:
        return False
    options = {**XLA_OPTIONS, **dict(extra)}
    return remembered("xla-options", sorted(options.items()), lambda: _compiles_with(options))


def _compiles_with(options: dict) -> bool:
    try:
        jax.jit(lambda x: x + 1, compiler_options=options).lower(1.0).compile()
    except Exception:  # an XLA without the flag: compile with its defaults
        return False
    return True


def at_top_level() -> bool:
    """Whether no JAX transformation (jit, grad, vmap) is tracing the caller."""
    return _at_top_level is not None and _at_top_level()


def under_trace() -> bool:
    """Whether a JAX transformation (jit, grad, vmap) is tracing the caller, also where
    every value the caller holds is concrete (a model that a jitted function closes over):
    its operations then give that trace's values."""
    if _at_top_level is not None:
        return not _at_top_level()
    return isinstance(jnp.zeros(()), jax.core.Tracer)


def run_now():
    """The context in which a program of concrete inputs is called to run at once, also
    where a JAX transformation traces the caller (a model that a jitted function closes
    over): there JAX's compile-time evaluation, which runs the program and every
    operation on constants eagerly (each a small program of its own, ~50 ms to compile);
    at top level none, so that such operations stay inside the one program (a double
    pendulum's first ``simulate``: ~60 small compiles, about 1 s)."""
    return jax.ensure_compile_time_eval() if under_trace() else contextlib.nullcontext()


class _ById:
    """A static value compared and hashed by identity (a module's globals dict)."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def __eq__(self, other):
        return isinstance(other, _ById) and other.value is self.value

    def __hash__(self):
        return id(self.value)


class _Closure(eqx.Module):
    """A Python function as a pytree: code, globals and name static, the values it closes
    over and its defaults as leaves. Equal code over equal static values hashes equal, so
    a new closure over new arrays reuses the compiled program."""

    code: types.CodeType = eqx.field(static=True)
    globals_: _ById = eqx.field(static=True)
    name: str = eqx.field(static=True)
    cells: tuple
    defaults: tuple | None
    kwdefaults: dict | None

    def function(self):
        cells = tuple(types.CellType(v) for v in self.cells)
        fun = types.FunctionType(self.code, self.globals_.value, self.name, self.defaults, cells)
        fun.__kwdefaults__ = self.kwdefaults
        return fun

    def __call__(self, *args, **kwargs):
        return self.function()(*args, **kwargs)


def _is_function(x) -> bool:
    return isinstance(x, types.FunctionType)


def _as_pytree(fun, seen=frozenset()):
    """``fun`` as a :class:`_Closure` when it (or a function it closes over) holds an array
    or tracer; else ``fun`` itself (static, as before). Recursive functions (found in
    ``seen``) and unfilled cells stay as they are."""
    if id(fun) in seen or not (fun.__closure__ or fun.__defaults__ or fun.__kwdefaults__):
        return fun
    try:
        cells = tuple(c.cell_contents for c in fun.__closure__ or ())
    except ValueError:  # a cell not yet assigned
        return fun
    inner = seen | {id(fun)}
    convert = functools.partial(_convert_functions, seen=inner)
    parts = (convert(cells), convert(fun.__defaults__), convert(fun.__kwdefaults__))
    if not any(eqx.is_array(leaf) for leaf in jax.tree_util.tree_leaves(parts)):
        return fun
    closure = _Closure(fun.__code__, _ById(fun.__globals__), fun.__name__, *parts)
    try:  # the static part must hash (an unhashable closed-over object: keep the function)
        leaves, treedef = jax.tree_util.tree_flatten(closure)
        hash(treedef)
        for leaf in leaves:
            if not eqx.is_array(leaf):
                hash(leaf)
    except TypeError:
        return fun
    return closure


def _convert_functions(tree, seen=frozenset()):
    """Every plain function leaf of ``tree`` that closes over arrays, as a pytree; ``tree``
    itself (not rebuilt) when it has no function leaf."""
    leaves = jax.tree_util.tree_leaves(tree, is_leaf=_is_function)
    if not any(_is_function(leaf) for leaf in leaves):
        return tree
    return jax.tree_util.tree_map(
        lambda x: _as_pytree(x, seen) if _is_function(x) else x, tree, is_leaf=_is_function
    )


def jit(fun=None, *, xla_options: dict | None = None, **jitkwargs):
    """``eqx.filter_jit(fun)`` that compiles with jaxmbd's XLA options when called at top
    level: use it for the top-level programs of your own loops around jaxmbd (a loss and its
    gradient, an optimiser step), whose XLA compilation then takes about a third less time
    than under ``jax.jit`` (tracing unchanged) at the same run time (module docstring;
    ``benchmarks/probes/compile_options.py``). Inside another transformation it is a plain
    ``eqx.filter_jit``. ``.lower(*args)`` lowers the version a call would compile; the two
    versions are ``.plain`` and ``.tuned`` (each with its own cache). ``xla_options``: XLA
    options of this program added to ``XLA_OPTIONS`` (used where those are)."""
    if fun is None:
        return functools.partial(jit, xla_options=xla_options, **jitkwargs)
    extra = tuple(sorted((xla_options or {}).items()))
    options = {**XLA_OPTIONS, **dict(extra)}
    plain = eqx.filter_jit(fun, **jitkwargs)
    tuned = eqx.filter_jit(fun, compiler_options=options, **jitkwargs)
    # a top-level call first asks the disk cache of exported programs (no tracing)
    stored = None if jitkwargs else cached(fun, f"{fun.__module__}.{fun.__qualname__}")

    def pick():
        top = _at_top_level is not None and _at_top_level() and _options_accepted(extra)
        return tuned if top else plain

    @functools.wraps(fun)
    def call(*args, **kwargs):
        flat = jax.tree_util.tree_flatten((args, kwargs))  # functions are leaves already
        if any(map(_is_function, flat[0])):
            args, kwargs = _convert_functions((args, kwargs))
            flat = None
        if stored is not None and at_top_level():
            accepted = options if _options_accepted(extra) else None
            out = stored(args, kwargs, accepted, flat=flat)
            if out is not NOT_STORED:
                return out
        return pick()(*args, **kwargs)

    call.plain, call.tuned = plain, tuned
    call.lower = lambda *args, **kwargs: pick().lower(
        *_convert_functions(args), **_convert_functions(kwargs)
    )
    return call
