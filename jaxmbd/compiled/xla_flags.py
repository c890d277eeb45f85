"""The XLA option that lets the CPU backend compile a whole small time step as one loop.

XLA's CPU runtime executes a program as a sequence of "thunks" (one per kernel, about
0.1-0.2 us of overhead each); a step of a small model is hundreds of them. A ``while``
loop whose body holds no custom call, ``dot`` fusion, scatter or sort and accesses fewer
bytes than ``xla_cpu_small_while_loop_byte_threshold`` is instead compiled into one native
function (``SmallWhileLoopHoistingPass``). jaxmbd's time steps qualify when their linear
solves use the elementwise kernels of :mod:`jaxmbd.linear.small` (``linear_solver="auto"``
on the CPU), but XLA's default threshold is far below a step's size.

:func:`configure` runs when jaxmbd is imported, before anything initialises JAX's backend:
it adds ``--xla_backend_extra_options=xla_cpu_small_while_loop_byte_threshold=N`` to
``XLA_FLAGS`` (appending to what is there, never replacing it) unless the user has already
set that option (their value is kept) or set ``JAXMBD_XLA_FLAGS=0``. XLA reads the
variable once, when the backend starts: if JAX's backend is already running at import
(jaxmbd imported after a computation), it cannot take effect and :func:`configure` warns
once with the exact line to set.

Hoisting has a price at compile time: LLVM compiles a hoisted loop as one function, on one
thread, and its time grows faster than the loop's size. A gradient's whole forward and
transposed time scans hoisted took the cart-pole's XLA compile from 24 to 96 CPU-s
(``benchmarks/results/bench_compile.md``, section 5). :func:`unhoisted_when_differentiated`
keeps a differentiated program's forward time loop (and rkmk's stage loops) out of the pass
while the loops inside a step and the transposed time loop stay hoisted; undifferentiated
programs are unchanged.
"""

from __future__ import annotations

import functools
import os
import re
import sys
import warnings

#: The option and its value: bytes accessed by one loop body below which XLA compiles the
#: loop natively. A step of the slider crank (54 Newton unknowns) is well below it
#: (``benchmarks/small_solve.py``); larger models keep XLA's runtime.
OPTION = "xla_cpu_small_while_loop_byte_threshold"
THRESHOLD_BYTES = 1 << 24
EXTRA = "--xla_backend_extra_options"
LINE = f"{EXTRA}={OPTION}={THRESHOLD_BYTES}"
#: ``JAXMBD_XLA_FLAGS=0`` leaves XLA_FLAGS alone.
OPT_OUT = "JAXMBD_XLA_FLAGS"

_warned = False


def _backend_started() -> bool:
    """Whether JAX's backends exist already (XLA_FLAGS was then read)."""
    if "jax" not in sys.modules:
        return False
    try:
        from jax._src import xla_bridge

        return bool(xla_bridge.backends_are_initialized())
    except Exception:  # an unknown jax: assume the worst, and say so
        return True


def with_threshold(flags: str) -> str:
    """``flags`` (an XLA_FLAGS value) with the threshold added: into an existing
    ``--xla_backend_extra_options=...`` list (its other options kept), else as a new
    flag at the end."""
    pattern = re.compile(rf"{EXTRA}=(\S*)")
    match = pattern.search(flags)
    if match is None:
        return f"{flags} {LINE}".strip()
    value = match.group(1)
    merged = f"{value},{OPTION}={THRESHOLD_BYTES}" if value else f"{OPTION}={THRESHOLD_BYTES}"
    return flags[: match.start(1)] + merged + flags[match.end(1) :]


def configure() -> str:
    """Add the threshold to ``XLA_FLAGS`` when that can still take effect; returns what
    happened: "user" (the option is set already: kept), "opt-out" (``JAXMBD_XLA_FLAGS=0``),
    "set", or "warned" (the backend had started: a one-time warning with the line)."""
    global _warned
    flags = os.environ.get("XLA_FLAGS", "")
    if OPTION in flags:
        return "user"
    if os.environ.get(OPT_OUT, "").strip() == "0":
        return "opt-out"
    if _backend_started():
        if not _warned:
            _warned = True
            warnings.warn(
                "jaxmbd was imported after JAX started its backend, so it could not raise "
                "XLA's small-loop threshold: time steps then run several times slower on "
                f"the CPU. Set it before starting Python (or import jaxmbd first):\n"
                f'    export XLA_FLAGS="$XLA_FLAGS {LINE}"\n'
                f"(or {OPT_OUT}=0 to silence this).",
                stacklevel=3,
            )
        return "warned"
    os.environ["XLA_FLAGS"] = with_threshold(flags)
    return "set"


def loop_hoisted(hlo_text: str, trip_count: int) -> bool:
    """Whether the compiled program (``compiled.as_text()``) runs its ``while`` loop of
    ``trip_count`` iterations (a ``lax.scan`` of that length, e.g. simulate's time steps) as
    one native call: the loop sits in a computation that a ``call`` marked
    ``xla_cpu_small_call`` runs (what ``SmallWhileLoopHoistingPass`` makes of it) instead
    of being executed by XLA's runtime thunk by thunk. Structure, not time: for tests and
    benchmarks."""
    computations = re.split(r"\n(?=\S)", hlo_text)
    count = re.compile(r'"known_trip_count":\{"n":"(\d+)"\}')
    holders = set()
    for computation in computations:
        name = computation.split(" ", 1)[0].lstrip("%")
        for line in computation.splitlines():
            if " while(" in line:
                match = count.search(line)
                if match and int(match.group(1)) == trip_count:
                    holders.add(name)
    if not holders:
        return False
    calls = re.findall(
        r"call\([^\n]*?to_apply=%([\w.\-]+)[^\n]*xla_cpu_small_call=\"true\"", hlo_text
    )
    return any(name in holders for name in calls)


def hoisted_sizes(hlo_text: str) -> list[int]:
    """The size (instructions, nested computations included) of each loop that XLA's
    small-while-loop pass hoisted in a compiled program (``compiled.as_text()``), largest
    first: LLVM compiles each as one function, and its time grows with that size."""
    computations = {}
    for computation in re.split(r"\n(?=\S)", hlo_text):
        name = computation.split(" ", 1)[0].lstrip("%")
        computations[name] = computation
    callee = re.compile(r"(?:to_apply|body|condition|calls|branch_computations)=\{?%([\w.\-]+)")

    def size(name, seen):
        if name in seen or name not in computations:
            return 0
        seen.add(name)
        text = computations[name]
        own = sum(1 for line in text.splitlines() if " = " in line)
        return own + sum(size(c, seen) for c in callee.findall(text))

    hoisted = re.findall(
        r"call\([^\n]*?to_apply=%([\w.\-]+)[^\n]*xla_cpu_small_call=\"true\"", hlo_text
    )
    return sorted((size(name, set()) for name in hoisted), reverse=True)


def thunk_instructions(hlo_text: str) -> int:
    """The instructions of a compiled program (``compiled.as_text()``) that XLA's CPU
    runtime executes as thunks, one kernel launch each: those outside the loops that
    XLA's small-while-loop pass hoisted, a fusion counted once, each computation once
    (a loop's body counts once, not per iteration). Structure, not time: for tests and
    benchmarks of what :func:`hoisted_call` and :func:`outside_hoisting` leave to the
    runtime."""
    computations = {}
    for computation in re.split(r"\n(?=\S)", hlo_text):
        name = computation.removeprefix("ENTRY ").split(" ", 1)[0].lstrip("%")
        computations[name] = computation
    entry = re.search(r"^ENTRY %?([\w.\-]+)", hlo_text, re.MULTILINE)
    callee = re.compile(r"(?:to_apply|body|condition)=%([\w.\-]+)|branch_computations=\{([^}]*)\}")
    small = re.compile(r'xla_cpu_small_call="true"')
    seen: set = set()
    count = 0

    def walk(name):
        nonlocal count
        if name in seen or name not in computations:
            return
        seen.add(name)
        for line in computations[name].splitlines():
            if " = " not in line or line.lstrip().startswith(("%param", "ROOT %param")):
                continue
            if re.search(r"= \S+ (?:parameter|get-tuple-element|tuple|constant)\(", line):
                continue
            count += 1
            if small.search(line):
                continue
            for one, branches in callee.findall(line):
                for target in [one] if one else branches.split(","):
                    walk(target.strip().lstrip("%"))

    if entry is not None:
        walk(entry.group(1))
    return count


def _through_fft(tree):
    """``tree`` unchanged, its inexact leaves passed together through one FFT of length 1
    (an exact identity, linear, its transpose again an FFT): XLA's small-while-loop pass
    refuses a loop that holds an FFT, and no simplification removes it. Not a custom call:
    XLA 0.10.2's loop passes clone a custom call in a short loop (rkmk's stage scan) without
    its FFI API version, and the program then fails to compile ("No registered
    implementation for untyped custom call to lapack_dtrsm_ffi", seen with a LAPACK
    triangular solve as the guard)."""
    import jax
    import jax.numpy as jnp
    from jax.custom_derivatives import SymbolicZero

    leaves, treedef = jax.tree_util.tree_flatten(tree)
    dtypes = [x.dtype if hasattr(x, "dtype") else jnp.result_type(x) for x in leaves]
    # integer leaves (float0 tangents) and symbolic-zero tangents pass by: a zero tangent
    # made concrete would reach the Newton loop, which cannot be linearised
    picked = [
        i
        for i, (x, d) in enumerate(zip(leaves, dtypes, strict=True))
        if jnp.issubdtype(d, jnp.floating) and not isinstance(x, SymbolicZero)
    ]
    if not picked:
        return tree
    dtype = jnp.result_type(*(dtypes[i] for i in picked))
    complex_dtype = jnp.result_type(dtype, jnp.complex64)
    flat = jnp.concatenate([jnp.ravel(leaves[i]).astype(dtype) for i in picked])
    flat = jnp.fft.fft(flat.astype(complex_dtype)[:, None], axis=-1)[:, 0].real.astype(dtype)
    start = 0
    for i in picked:
        size = jnp.size(leaves[i])
        leaves[i] = flat[start : start + size].reshape(jnp.shape(leaves[i])).astype(dtypes[i])
        start += size
    return jax.tree_util.tree_unflatten(treedef, leaves)


def outside_hoisting(tree):
    """``tree`` as it is, passed through a length-1 FFT (:func:`_through_fft`) on the CPU:
    the loop that computes it (a time step's scan) is not hoisted, while the loops inside
    it stay hoistable. For a step whose own loops are large (MuJoCo's constraint solve,
    :mod:`jaxmbd.soft_constraints`), where LLVM's compile of the whole time loop as one
    function takes minutes."""
    import jax

    return _through_fft(tree) if jax.default_backend() == "cpu" else tree


def hoisted_call(f, *args, tangent_f=None):
    """``f(*args)``, on the CPU computed by one native function inside a step that XLA runs
    thunk by thunk (:func:`outside_hoisting`): a ``while`` loop of one iteration, whose
    count (1, behind an optimisation barrier) XLA cannot know, so that no simplification
    removes it and ``SmallWhileLoopHoistingPass`` compiles its body as one function; its
    inputs pass through a barrier with the counter, so that no code motion moves the body
    out of the loop. One call instead of one thunk per kernel: dm_control cheetah's soft
    step ran its rows and mass solves as ~230 thunks. ``f`` must be free of what the pass
    refuses (custom calls, dots, scatters, sorts), or it runs as thunks as before.

    ``args``: pytrees; their ``jax.Array`` leaves are the call's inputs, every other leaf
    (NumPy arrays, Python scalars, static fields) is passed as it is. Derivatives are
    ``f``'s own (a ``custom_jvp`` whose rule differentiates ``f`` itself, no loop), or
    ``tangent_f``'s: the same function written for differentiation; under ``vmap`` the
    loop's count stays unbatched. Other backends: ``f(*args)`` (with ``tangent_f``'s
    derivatives where it is given)."""
    import equinox as eqx
    import jax
    import jax.numpy as jnp
    from jax import lax

    cpu = jax.default_backend() == "cpu"
    if not cpu and tangent_f is None:
        return f(*args)
    dynamic, static = eqx.partition(args, lambda x: isinstance(x, jax.Array))

    def call(dynamic, f=f):
        return f(*eqx.combine(dynamic, static))

    @jax.custom_jvp
    def once(dynamic):
        if not cpu:
            return call(dynamic)
        # traced once: the loop's body reuses the trace that gave the output's shapes (the
        # rows of a model with convex colliders took seconds a trace)
        traced = jax.jit(call)
        shapes = jax.eval_shape(traced, dynamic)
        out = jax.tree_util.tree_map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)
        one = lax.optimization_barrier(jnp.ones((), jnp.int32))

        def body(carry):
            inputs, i = lax.optimization_barrier((dynamic, carry[0]))
            return i + 1, traced(inputs)

        return lax.while_loop(lambda c: c[0] < one, body, (jnp.zeros((), jnp.int32), out))[1]

    differentiated = f if tangent_f is None else tangent_f
    once.defjvp(
        lambda primals, tangents: jax.jvp(lambda d: call(d, differentiated), primals, tangents)
    )
    return once(dynamic)


def _make_unhoisted_when_differentiated(tangent: bool):
    import jax

    @jax.custom_jvp
    def unhoisted(tree):
        return tree

    @functools.partial(unhoisted.defjvp, symbolic_zeros=True)
    def _rule(primals, tangents):
        (tree,), (dtree,) = primals, tangents
        return _through_fft(tree), (_through_fft(dtree) if tangent else dtree)

    return unhoisted


_unhoisted: dict = {}


def unhoisted_when_differentiated(tree, *, transposed: bool = False):
    """``tree`` (a loop's carry) as it is, except that in a differentiated program its
    value (and, unless ``transposed``, its tangent) passes through a length-1 FFT
    (:func:`_through_fft`), which XLA's small-while-loop pass does not hoist: the enclosing
    loop then runs as XLA thunks, while the loops inside a step (the Newton iteration, the
    elementwise KKT solves) stay hoisted.

    A gradient's loop is two loops: the forward one (the step and its linearisation, whose
    residuals it stores) and the transposed one (the adjoint step). The guard on the value
    keeps the first out of the pass; the guard on the tangent the second. Why: LLVM
    compiles a hoisted loop as one function, on one thread; the cart-pole gradient's
    hoisted forward and transposed time scans took 75-96 CPU-s of XLA compile, against 35
    with this guard (benchmarks/results/bench_compile.md, section 5 and its correction),
    and its two hoisted stage loops of ~7k instructions each about half of what was left
    (section 7). ``transposed=True`` (simulate's time scan) leaves the transposed loop to
    the pass: it is the smaller of the two (the double pendulum's gen_alpha adjoint step,
    ~3.8k instructions against ~19k for the forward one) and the one whose thunks cost the
    most per instruction (benchmarks/results/gradients_cost.md). A loop nested inside
    (rkmk's guarded stage loop) still keeps it out.

    Undifferentiated programs (simulate) are unchanged: no op is added. Zero tangents stay
    symbolic (a concrete one would reach the Newton loop, which JAX cannot linearise).
    CPU only (the pass is the CPU backend's). At trace time, ``JAXMBD_HOIST_GRADIENT_LOOPS``
    =1 keeps every loop hoistable (slower compile, fastest gradient run; simulate's step is
    then recomputed in the adjoint, :func:`forward_loop_hoisted_when_differentiated`, so
    the hoisted forward loop is the step, not its linearisation: the double pendulum's
    ~9.4k instructions instead of ~19k), =0 guards the transposed loops too."""
    import jax

    mode = gradient_loops_mode()
    if mode == "1" or jax.default_backend() != "cpu":
        return tree
    tangent = mode == "0" or not transposed
    if tangent not in _unhoisted:
        _unhoisted[tangent] = _make_unhoisted_when_differentiated(tangent)
    return _unhoisted[tangent](tree)


#: ``JAXMBD_HOIST_GRADIENT_LOOPS``: 1 hoists every differentiated loop, 0 none (read at
#: trace time; :func:`unhoisted_when_differentiated`, and for the joint formulation
#: :func:`joint_loops_hoisted_when_differentiated` and :func:`joint_loop_guard`).
HOIST_GRADIENT_LOOPS = "JAXMBD_HOIST_GRADIENT_LOOPS"
#: The mode when ``JAXMBD_HOIST_GRADIENT_LOOPS`` is unset: "" hoists the absolute
#: formulations' transposed time loop only, and the joint formulation's loops whole
#: (benchmarks/results/gradients_cost.md and gradients_defaults.md weigh it against "1").
DEFAULT_GRADIENT_LOOPS = ""


def gradient_loops_mode() -> str:
    """``JAXMBD_HOIST_GRADIENT_LOOPS`` read now (at trace time): "1" (every differentiated
    loop hoistable), "0" (none), "" (the transposed time loop only), else the default."""
    mode = os.environ.get(HOIST_GRADIENT_LOOPS, "").strip()
    return mode if mode in ("0", "1") else DEFAULT_GRADIENT_LOOPS


def forward_loop_hoisted_when_differentiated() -> bool:
    """Whether a differentiated time loop's forward half is left to XLA's hoisting pass
    (on the CPU, mode "1"): its step is then worth recomputing in the adjoint
    (``jax.checkpoint``), which shrinks the hoisted forward loop to the step itself. With
    the forward loop run as thunks the recomputation only grows the hoisted adjoint loop
    (the double pendulum's gradient: XLA compile +50 %, run -4 %)."""
    import jax

    return jax.default_backend() == "cpu" and gradient_loops_mode() == "1"


def joint_loops_hoisted_when_differentiated() -> bool:
    """Whether a differentiated time loop of the joint formulation
    (:mod:`jaxmbd.joint_space`) is left whole to XLA's hoisting pass, its step recomputed
    in the adjoint: on the CPU, unless ``JAXMBD_HOIST_GRADIENT_LOOPS=0``. Its forward loop
    then runs the step alone and its transposed loop (recomputation, linearisation and
    transpose) is one native loop too (:func:`jaxmbd.tree._elementwise.pick` keeps
    scatters out of it).
    ``=0`` gives the plain program (gathers' scatters, the factorisation transposed, the
    linearisation stored) with its loops kept out of the hoisting (:func:`joint_loop_guard`).
    Measured against the joint loops left as they come (the forward loop with its
    linearisation native, the transposed one a runtime loop of scatters), in one process
    each, 2-core CPU at load 8-11 (``benchmarks/results/gradients_defaults.md``): gradient /
    forward of 1000 steps, double pendulum gen_alpha 4.4 -> 2.5, arm3 rkmk 6.8 -> 4.4; to a
    first gradient of ``benchmarks/compile_time.py``'s programs arm3 167 -> 139 s,
    cart-pole 182 -> 98 s. The absolute formulations keep the mode's own default (their
    forward loop hoisted costs compile: :func:`forward_loop_hoisted_when_differentiated`)."""
    import jax

    return jax.default_backend() == "cpu" and gradient_loops_mode() != "0"


def joint_loop_guard(tree):
    """``tree`` (the carry of a joint-formulation time or stage loop) as it is, except
    with ``JAXMBD_HOIST_GRADIENT_LOOPS=0`` on the CPU, where a differentiated program's
    value and tangent pass through a length-1 FFT (:func:`_through_fft`): none of the
    gradient's loops is then hoisted (XLA runs them as thunks), the smallest compile for the
    slowest run. To a first gradient, fresh processes, medians of 3
    (``JAXMBD_HOIST_GRADIENT_LOOPS=0 python -m benchmarks.compile_time --models cartpole
    arm3 --variants mbd.jit``): the 10-step cart-pole 7.0 s against 8.5 by default, run 1.8
    against 0.3 ms; arm3 5.4 s against 7.2, run 13.9 against 1.5 ms.
    Undifferentiated programs and the other modes: no op added (the same program)."""
    return unhoisted_when_differentiated(tree) if gradient_loops_mode() == "0" else tree


configure()  # at import: jaxmbd/__init__.py imports this module before anything else
