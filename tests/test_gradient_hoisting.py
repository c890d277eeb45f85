"""A gradient's time loops stay out of XLA's small-while-loop hoisting, simulate's do not.

``jaxmbd.compiled.xla_flags.unhoisted_when_differentiated`` passes a time step's carry (and rkmk's
stage carry) through a length-1 FFT only in differentiated programs (compile time: a hoisted
loop is one LLVM function). Checked on the compiled HLO of a toy scan (cheap) and on the
jaxpr of a real simulate gradient (tracing only); values must be unchanged to the bit."""

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from jax.extend import core as jax_core
from tolerances import ROUND_OFF

import jaxmbd as mbd
from jaxmbd.compiled import xla_flags as _xla_flags
from jaxmbd.compiled.xla_flags import hoisted_sizes, loop_hoisted, unhoisted_when_differentiated


def _toy(p, guard=True):
    def step(carry, k):
        carry = unhoisted_when_differentiated(carry) if guard else carry
        x, v = carry
        v = v - 0.01 * jnp.sin(x) * p * k
        return (x + 0.01 * v, v), x

    return jnp.sum(jax.lax.scan(step, (jnp.ones(3), jnp.zeros(3)), jnp.arange(1.0, 21.0))[1] ** 2)


def _cpu_only():
    if jax.default_backend() != "cpu":
        pytest.skip("the hoisting pass is XLA's CPU backend's")


def test_forward_loop_hoisted_gradient_loops_not():
    _cpu_only()
    forward = jax.jit(_toy).lower(0.7).compile().as_text()
    assert loop_hoisted(forward, 20)
    assert len(hoisted_sizes(forward)) == 1 and hoisted_sizes(forward)[0] > 10
    grad = jax.jit(jax.value_and_grad(_toy)).lower(0.7).compile().as_text()
    assert not loop_hoisted(grad, 20) and hoisted_sizes(grad) == []
    plain = jax.jit(jax.value_and_grad(lambda p: _toy(p, guard=False))).lower(0.7).compile()
    assert loop_hoisted(plain.as_text(), 20)  # the guard is what keeps them out
    value, g = jax.jit(jax.value_and_grad(_toy))(0.7)
    value0, g0 = plain(0.7)
    assert value == value0 and g == g0  # an exact identity: same bits


def test_opt_out_and_higher_order(monkeypatch):
    _cpu_only()
    monkeypatch.setenv(_xla_flags.HOIST_GRADIENT_LOOPS, "1")
    grad = jax.jit(jax.value_and_grad(_toy)).lower(0.7).compile().as_text()
    assert loop_hoisted(grad, 20)
    monkeypatch.delenv(_xla_flags.HOIST_GRADIENT_LOOPS)
    # second order and forward mode go through the rule too (exact identity at every order)
    h = jax.grad(jax.grad(_toy))(0.7)
    h0 = jax.grad(jax.grad(lambda p: _toy(p, guard=False)))(0.7)
    np.testing.assert_array_equal(h, h0)
    assert jax.jacfwd(_toy)(0.7) == jax.jacfwd(lambda p: _toy(p, guard=False))(0.7)


def test_simulate_gradient_has_the_guard_and_forward_not():
    """simulate's time step and rkmk's stages carry the guard: a length-1 FFT in the
    gradient's forward and transposed time loops and in their stage loops (counted in the
    jaxpr by how many scans enclose it: tracing only), none in the forward program."""
    _cpu_only()
    model = mbd.models.double_pendulum()

    def loss(scale):
        moved = eqx.tree_at(lambda m: m.mass, model, model.mass * scale)
        sol = mbd.simulate(moved, formulation="rA", t_end=3e-3, h=1e-3, integrator="rkmk")
        return jnp.sum(sol.r[-1] ** 2)

    def guards(jaxpr, scans=0):
        found = []  # the guard's length-1 FFTs, by the number of enclosing scans
        for eqn in jaxpr.eqns:
            if eqn.primitive.name == "fft" and tuple(eqn.params["fft_lengths"]) == (1,):
                found.append(scans)
            for sub in jax_core.jaxprs_in_params(eqn.params):
                found += guards(sub, scans + (eqn.primitive.name == "scan"))
        return found

    assert guards(jax.make_jaxpr(loss)(1.0).jaxpr) == []
    # the time step's value (forward scan), the stages' value and tangent inside
    assert sorted(guards(jax.make_jaxpr(jax.grad(loss))(1.0).jaxpr)) == [1, 2, 2]


def test_stage_guard_compiles_and_runs_in_a_short_loop():
    """rkmk's stage scan (4 iterations) guarded by an FFT that survives XLA's passes into
    the compiled gradient, which is right (central differences). With a LAPACK custom call
    as the guard, XLA 0.10.2 cloned it in a short loop without its FFI version and the
    se3 gradient of tests/test_bushing.py failed to compile ("No registered implementation
    for untyped custom call to lapack_dtrsm_ffi"): that test is the regression check."""
    _cpu_only()
    model = mbd.models.double_pendulum()

    def final_x(scale):
        moved = eqx.tree_at(lambda m: m.gravity, model, model.gravity * scale)
        return mbd.simulate(moved, formulation="se3", integrator="rkmk", t_end=5e-3,
                            h=1e-3).r[-1].sum()  # fmt: skip

    grad = jax.jit(jax.grad(final_x))
    g = grad(1.0)
    stages = grad.lower(1.0).compile().as_text()
    assert " fft(" in stages
    e = 1e-4
    fd = (final_x(1.0 + e) - final_x(1.0 - e)) / (2 * e)
    assert float(g) == pytest.approx(float(fd), rel=1e-8, abs=0) and abs(float(g)) > 1e-8


#: primitives that keep XLA's CPU small-while-loop pass from hoisting a loop that holds
#: them: LAPACK's custom calls, scatters (emitted outside the loop's native code) and the
#: guard's FFT
_UNHOISTABLE = {"lu", "triangular_solve", "eigh", "cholesky", "qr", "svd", "scatter",
                "scatter-add", "scatter_add", "fft", "pure_callback"}  # fmt: skip


def _reverse_scans(jaxpr, length, found=None):
    """The scans of ``length`` iterations run in reverse (a gradient's transposed loops)."""
    found = [] if found is None else found
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "scan" and eqn.params["reverse"]:
            if eqn.params["length"] == length:
                found.append(eqn.params["jaxpr"].jaxpr)
        for sub in jax_core.jaxprs_in_params(eqn.params):
            _reverse_scans(sub, length, found)
    return found


def _primitives(jaxpr, names=None):
    names = set() if names is None else names
    for eqn in jaxpr.eqns:
        names.add(eqn.primitive.name)
        for sub in jax_core.jaxprs_in_params(eqn.params):
            _primitives(sub, names)
    return names


def test_adjoint_time_loop_is_hoistable():
    """The default gradient's transposed time loop (gen_alpha, rA, the double pendulum)
    holds nothing that keeps XLA from compiling it as one native loop: the implicit
    function's factorisation and solves stay in the step's elementwise kernels (not
    LAPACK), row picks transpose to pads and sums (not scatters), and the compile-time
    guard sits on the forward loop only. Traced, not compiled (the compiled check is the
    slow test below)."""
    _cpu_only()
    model = mbd.models.double_pendulum()
    steps = 4

    def loss(rates):
        moved = eqx.tree_at(lambda m: m.omega0, model, model.omega0 * rates)
        sol = mbd.simulate(
            moved, formulation="rA", t_end=steps * 1e-3, h=1e-3, integrator="gen_alpha"
        )
        return jnp.sum(sol.r[-1] ** 2)

    transposed = _reverse_scans(jax.make_jaxpr(jax.grad(loss))(1.0).jaxpr, steps)
    assert len(transposed) == 1
    assert _primitives(transposed[0]) & _UNHOISTABLE == set()


@pytest.mark.slow
def test_adjoint_time_loop_is_hoisted_when_compiled():
    """The same gradient compiled: its transposed time loop is one native call, its
    forward one is not (the guard), and the gradient matches central differences."""
    _cpu_only()
    model = mbd.models.double_pendulum()
    steps = 6

    def loss(rates):
        moved = eqx.tree_at(lambda m: m.omega0, model, model.omega0 * rates)
        sol = mbd.simulate(
            moved, formulation="rA", t_end=steps * 1e-3, h=1e-3, integrator="gen_alpha"
        )
        return jnp.sum(sol.r[-1] ** 2)

    grad = jax.jit(jax.grad(loss))
    text = grad.lower(1.0).compile().as_text()
    assert loop_hoisted(text, steps)
    e = 1e-5
    fd = (loss(1.0 + e) - loss(1.0 - e)) / (2 * e)
    assert float(grad(1.0)) == pytest.approx(float(fd), rel=1e-6)


def _forward_scans(jaxpr, length, found=None):
    """The scans of ``length`` iterations run forward (simulate's time loop, and the
    forward half of its gradient)."""
    found = [] if found is None else found
    for eqn in jaxpr.eqns:
        if eqn.primitive.name == "scan" and not eqn.params["reverse"]:
            if eqn.params["length"] == length:
                found.append(eqn)
        for sub in jax_core.jaxprs_in_params(eqn.params):
            _forward_scans(sub, length, found)
    return found


def _pendulum_loss(steps, **options):
    model = mbd.models.double_pendulum()

    def loss(scale):
        moved = eqx.tree_at(lambda m: m.gravity, model, model.gravity * scale)
        sol = mbd.simulate(
            moved, formulation="rA", t_end=steps * 1e-3, h=1e-3, integrator="gen_alpha", **options
        )
        return jnp.sum(sol.r[-1] ** 2) + jnp.sum(sol.rdot[-1] ** 2)

    return loss


def test_hoisted_gradient_stores_roots_not_linearisations(monkeypatch):
    """With every loop hoisted, the gradient's forward time loop stores per step only what
    the adjoint cannot cheaply recompute (the carry, the Newton root and its factored
    Jacobian: 18 arrays here), not the residuals of the step's linearisation (170 without
    the recomputation, as in the guarded default). Traced only."""
    _cpu_only()
    monkeypatch.setenv(_xla_flags.HOIST_GRADIENT_LOOPS, "1")
    steps = 3
    (scan,) = _forward_scans(jax.make_jaxpr(jax.grad(_pendulum_loss(steps)))(1.0).jaxpr, steps)
    assert len(scan.outvars) - scan.params["num_carry"] <= 30


@pytest.mark.slow
def test_recomputed_step_matches_central_differences(monkeypatch):
    """The gradient with the step recomputed in the adjoint (every loop hoisted) against
    central differences."""
    _cpu_only()
    monkeypatch.setenv(_xla_flags.HOIST_GRADIENT_LOOPS, "1")
    loss = _pendulum_loss(3)
    g = float(jax.jit(jax.grad(loss))(1.1))
    e = 1e-5
    lo, hi = jax.jit(jax.vmap(loss))(jnp.array([1.1 - e, 1.1 + e]))
    assert g == pytest.approx(float(hi - lo) / (2 * e), rel=1e-6) and abs(g) > 1e-6


@pytest.mark.slow
def test_recomputed_step_gives_the_same_derivatives(monkeypatch):
    """The same gradient equals the guarded one (its linearisation stored) to round-off,
    and so does forward over reverse (the implicit rule's primal output carries its own
    derivative through the recomputation). ``checkpoint`` longer than the run changes
    nothing but the program's cache key (simulate's programs are cached per options, not
    per mode)."""
    _cpu_only()

    def first_and_second(loss):
        grad = jax.grad(loss)
        return jax.jit(lambda s: jax.jvp(grad, (s,), (jnp.ones_like(s),)))(1.1)

    monkeypatch.setenv(_xla_flags.HOIST_GRADIENT_LOOPS, "1")
    g1, h1 = first_and_second(_pendulum_loss(3))
    monkeypatch.setenv(_xla_flags.HOIST_GRADIENT_LOOPS, "0")
    g0, h0 = first_and_second(_pendulum_loss(3, checkpoint=30))
    assert float(g1) == pytest.approx(float(g0), rel=1e-10) and abs(float(g0)) > 1e-6
    assert float(h1) == pytest.approx(float(h0), rel=1e-8) and abs(float(h0)) > 1e-8


def _joint_pendulum_loss(steps):
    model = mbd.models.double_pendulum()  # a tree: the joint formulation by default

    def loss(scale):
        moved = eqx.tree_at(lambda m: m.gravity, model, model.gravity * scale)
        sol = mbd.simulate(moved, t_end=steps * 1e-3, h=1e-3, integrator="rkmk")
        return jnp.sum(sol.r[-1] ** 2) + jnp.sum(sol.rdot[-1] ** 2)

    return loss


def test_joint_gradient_loops_hoistable_by_default(monkeypatch):
    """The joint formulation's default gradient: its transposed time loop holds no scatter
    (the tree's row picks take their tangents by slices) and its forward time loop stores
    the state per step, not the residuals of the step's linearisation (the step is
    recomputed in the adjoint). ``JAXMBD_HOIST_GRADIENT_LOOPS=0``: the plain gathers'
    scatters and the stored linearisation, and both time loops and the stage loops
    guarded (an FFT on the carry keeps every loop out of XLA's hoisting). Traced only."""
    _cpu_only()
    steps = 5
    # the explicit steps' time loop runs steps + 1 times (the last gives the end's
    # accelerations); rkmk's stage loop has four iterations
    time_loop = steps + 1

    def loops():
        jax.clear_caches()  # the mode is read at trace time
        jaxpr = jax.make_jaxpr(jax.grad(_joint_pendulum_loss(steps)))(1.1).jaxpr
        (forward,) = _forward_scans(jaxpr, time_loop)
        (transposed,) = _reverse_scans(jaxpr, time_loop)
        bodies = [forward.params["jaxpr"].jaxpr, transposed]
        # rkmk's stage loops (not the carry-less scans JAX splits off them)
        bodies += [e.params["jaxpr"].jaxpr for e in _forward_scans(jaxpr, 4)
                   if e.params["num_carry"]]  # fmt: skip
        bodies += _reverse_scans(jaxpr, 4)
        stored = len(forward.outvars) - forward.params["num_carry"]
        guarded = ["fft" in _primitives(body) for body in bodies]
        return stored, _primitives(transposed) & _UNHOISTABLE, guarded

    monkeypatch.delenv(_xla_flags.HOIST_GRADIENT_LOOPS, raising=False)
    stored, unhoistable, guarded = loops()
    assert unhoistable == set() and not any(guarded)
    monkeypatch.setenv(_xla_flags.HOIST_GRADIENT_LOOPS, "0")
    stored0, unhoistable0, guarded0 = loops()
    assert "scatter-add" in unhoistable0
    assert stored < stored0 / 2
    assert len(guarded0) >= 4 and all(guarded0)  # the time loops and rkmk's stage loops


@pytest.mark.slow
def test_joint_recomputed_step_gives_the_same_derivatives(monkeypatch):
    """The joint formulation's default gradient (step recomputed, slice tangents) equals
    the former program's (``JAXMBD_HOIST_GRADIENT_LOOPS=0``) to round-off, and matches
    central differences; so does forward over reverse."""
    _cpu_only()
    loss = _joint_pendulum_loss(20)

    def first_and_second():
        jax.clear_caches()
        grad = jax.grad(loss)
        return jax.jit(lambda s: jax.jvp(grad, (s,), (jnp.ones_like(s),)))(1.1)

    monkeypatch.delenv(_xla_flags.HOIST_GRADIENT_LOOPS, raising=False)
    g, h = first_and_second()
    monkeypatch.setenv(_xla_flags.HOIST_GRADIENT_LOOPS, "0")
    g0, h0 = first_and_second()
    assert float(g) == pytest.approx(float(g0), rel=1e-10) and abs(float(g0)) > 1e-6
    assert float(h) == pytest.approx(float(h0), rel=1e-8) and abs(float(h0)) > 1e-8
    e = 1e-5
    fd = (loss(1.1 + e) - loss(1.1 - e)) / (2 * e)
    assert float(g) == pytest.approx(float(fd), rel=1e-6)


def test_row_products_transpose_without_library_fusion():
    """The transpose of the tree's row products P = X Y^T with 27 rows (a humanoid's mass
    matrix) is slices and adds: the transpose of a broadcast was a reduce over the rows,
    which XLA's CPU backend hands to a YNNPACK custom fusion, and a loop that holds one is
    not compiled as one native loop. Both of the gradient's loops are hoisted and it equals the
    closed form (dX = W Y, dY = W^T X for the loss sum(W * P))."""
    _cpu_only()
    from jaxmbd.tree._elementwise import row_products

    rng = np.random.default_rng(0)
    X, Y, W = (jnp.asarray(rng.normal(size=s)) for s in ((27, 6), (27, 6), (27, 27)))

    def loss(X, Y):
        def step(carry, _):
            x, y = carry
            return (x + 1e-3 * jnp.tanh(row_products(x, y))[:, :6], y), None

        (x, _), _ = jax.lax.scan(step, (X, Y), None, length=5)
        return jnp.sum(W * row_products(x, Y))

    grad = jax.jit(jax.grad(loss, argnums=(0, 1)))
    text = grad.lower(X, Y).compile().as_text()
    # both the forward and the transposed loop native (with the broadcast: the forward only)
    assert "ynn_fusion" not in text and len(hoisted_sizes(text)) == 2
    dX, dY = jax.grad(lambda X, Y: jnp.sum(W * row_products(X, Y)), argnums=(0, 1))(X, Y)
    np.testing.assert_allclose(dX, np.asarray(W) @ np.asarray(Y), rtol=1e-13)
    np.testing.assert_allclose(dY, np.asarray(W).T @ np.asarray(X), rtol=1e-13)


def test_tree_picks_and_splits_transpose_without_pads(monkeypatch):
    """The reverse mode of the tree's row picks (a row picked twice, one not at all), spatial
    halves, hat matrices and the unrolled Cholesky solve: concatenations and splits, no zero
    pad (a slice's transpose) or scatter (a gather's), and the same cotangents as the plain
    indexing and a dense solve."""
    _cpu_only()
    monkeypatch.delenv(_xla_flags.HOIST_GRADIENT_LOOPS, raising=False)
    from jaxmbd.tree._elementwise import cholesky_solve, halves, pick
    from jaxmbd.tree.dynamics import _hat

    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(5, 6)))
    A = rng.normal(size=(3, 3))
    M = jnp.asarray(A @ A.T + 3 * np.eye(3))
    b = jnp.asarray(rng.normal(size=3))
    index = np.array([3, 0, 3, 1])

    def tree_ops(x, M, b):
        w, v = halves(x)
        return pick(x, index), w * v, _hat(w), cholesky_solve(M, b)

    def plain(x, M, b):
        w, v = x[:, :3], x[:, 3:]
        return x[index], w * v, jax.vmap(_hat)(w), jnp.linalg.solve(M, b)

    shapes = jax.eval_shape(tree_ops, x, M, b)
    cts = jax.tree_util.tree_map(lambda a: jnp.asarray(rng.normal(size=a.shape)), shapes)

    def pullback(f):
        return jax.jit(lambda x, M, b, cts: jax.vjp(f, x, M, b)[1](cts))

    transposed = jax.make_jaxpr(lambda cts: jax.vjp(tree_ops, x, M, b)[1](cts))(cts).jaxpr
    assert _primitives(transposed) & {"pad", *_UNHOISTABLE} == set()
    got, want = pullback(tree_ops)(x, M, b, cts), pullback(plain)(x, M, b, cts)

    def symmetric(g):  # the Cholesky reads M's lower triangle: compare along symmetric dM
        return g + g.T - jnp.diag(jnp.diag(g))

    got = (got[0], symmetric(got[1]), got[2])
    want = (want[0], symmetric(want[1]), want[2])
    for g, w in zip(got, want, strict=True):
        np.testing.assert_allclose(g, w, rtol=0, atol=ROUND_OFF * np.abs(w).max())


def test_joint_step_under_controls_holds_the_accelerations_once():
    """Under controls (each step its own model) an rkmk step's start, three stages and end
    are the rows of one loop (:meth:`~jaxmbd.joint_space.steppers.RungeKutta4.start_and_advance`):
    the time loop's body holds the accelerations' code once, where a start before the
    stage loop and an end after it held it three times (the cart-pole's gradient compiled
    in half the time). Its gradient's forward loop stores the state and the outputs, not
    the step's linearisation. Traced only."""
    b = mbd.ModelBuilder("swing", gravity=(0.0, 0.0, -9.81))
    b.add_body("cart", mass=1.0, inertia=[0.01] * 3, r=(0, 0, 0))
    b.add_body("pole", mass=0.1, inertia=[0.01, 0.01, 1e-4], r=(0, 0, 0.5))
    b.translational("rail", body_i="ground", body_j="cart", point=(0, 0, 0), axis=(1, 0, 0))
    b.revolute("hinge", body_i="cart", body_j="pole", point=(0, 0, 0), axis=(0, 1, 0))
    b.add_actuator("push", joint="rail", kind="motor", gear=10.0)
    model = b.build()  # closed over by the traced loss: its tree is built concretely
    steps = 4

    def loss(u):
        sol = mbd.simulate(model, t_end=steps * 0.01, h=0.01, controls=u, integrator="rkmk")
        return jnp.sum(sol.r[-1] ** 2)

    def size(jaxpr):
        return sum(1 + sum(size(s) for s in jax_core.jaxprs_in_params(e.params))
                   for e in jaxpr.eqns)  # fmt: skip

    u = jnp.full((steps, 1), 0.3)
    (time_loop,) = _forward_scans(jax.make_jaxpr(loss)(u).jaxpr, steps)
    body = time_loop.params["jaxpr"].jaxpr
    (rows,) = _forward_scans(body, 5)  # start, three stages, end
    assert not _forward_scans(body, 3) and not _forward_scans(body, 4)
    inner = size(rows.params["jaxpr"].jaxpr)
    assert size(body) - inner < inner / 2  # no accelerations outside the rows' loop
    (forward,) = _forward_scans(jax.make_jaxpr(jax.grad(loss))(u).jaxpr, steps)
    assert len(forward.outvars) - forward.params["num_carry"] <= 16


def _islands_step(x, p):
    """A step run as thunks (the FFT guard), with a native call inside it."""
    from jaxmbd.compiled.xla_flags import hoisted_call, outside_hoisting

    def f(x, p, scale):
        return jnp.sin(x) * p + jnp.cos(x * p) * scale

    return outside_hoisting(hoisted_call(f, x, p, 0.5))


def test_hoisted_call_is_one_native_call_with_f_values_and_derivatives():
    from jaxmbd.compiled.xla_flags import hoisted_call

    _cpu_only()
    x, p = jnp.linspace(0.1, 1.0, 4), jnp.asarray(0.7)

    def f(x, p, scale):
        return jnp.sin(x) * p + jnp.cos(x * p) * scale

    hlo = jax.jit(_islands_step).lower(x, p).compile().as_text()
    # the body computed inside the call (not moved out of it by loop-invariant code motion)
    assert len(hoisted_sizes(hlo)) == 1 and hoisted_sizes(hlo)[0] >= 5
    np.testing.assert_array_equal(jax.jit(_islands_step)(x, p), f(x, p, 0.5))

    def loss(x, p, call):
        return jnp.sum(call(f, x, p, 0.5) ** 2)

    plain = jax.grad(loss, (0, 1))(x, p, lambda f, *a: f(*a))
    hoisted = jax.grad(loss, (0, 1))(x, p, hoisted_call)
    for a, b in zip(hoisted, plain, strict=True):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(
        jax.jacfwd(lambda p: hoisted_call(f, x, p, 0.5))(p), jax.jacfwd(lambda p: f(x, p, 0.5))(p)
    )
    # vmap: members through one loop whose count is not batched
    xs = jnp.stack([x, 2 * x])
    batched = jax.jit(jax.vmap(lambda x: hoisted_call(f, x, p, 0.5)))
    np.testing.assert_array_equal(batched(xs), jax.vmap(lambda x: f(x, p, 0.5))(xs))
    assert len(hoisted_sizes(batched.lower(xs).compile().as_text())) == 1


def test_hoisted_call_takes_derivatives_from_tangent_f():
    """A loop that reverse mode cannot go through, differentiated by its plain form."""
    from jaxmbd.compiled.xla_flags import hoisted_call

    def looped(x):  # x^3 by a while loop
        return jax.lax.while_loop(lambda c: c[0] < 3, lambda c: (c[0] + 1, c[1] * x),
                                  (0, jnp.ones_like(x)))[1]  # fmt: skip

    x = jnp.linspace(0.5, 1.5, 3)
    g = jax.grad(lambda x: jnp.sum(hoisted_call(looped, x, tangent_f=lambda x: x**3)))(x)
    np.testing.assert_allclose(g, 3 * x**2, rtol=1e-15)
    np.testing.assert_allclose(hoisted_call(looped, x, tangent_f=lambda x: x**3), x**3, rtol=1e-15)
