"""Batches of the joint formulation: sine and cosine as vectorisable polynomials
(``jaxmbd.compiled.trig``), and the opt-in batch-last rule (``jaxmbd.compiled.batch_last``, the
batch as
every array's minor axis): values against ``jax.vmap``, single runs and NumPy, gradients
against central differences, and the structure of the compiled batch programs."""

import re

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from tolerances import ROUND_OFF

import jaxmbd as mbd
import jaxmbd.joint_space.run as joint_run
from jaxmbd.analysis.batch import _chunk_size, _static_options, _vmapped
from jaxmbd.compiled.batch_last import batch_last
from jaxmbd.compiled.trig import sin_cos
from jaxmbd.joint_space import RungeKutta4, SemiImplicitEuler

PENDULUM = """<mujoco><option timestep="0.001"/><worldbody><body name="a">
<joint name="j1" type="hinge" axis="1 0 0"/><geom type="capsule" fromto="0 0 0 0 1 0.2"
size="0.05" mass="1"/><body name="b" pos="0 1 0.2"><joint name="j2" type="hinge"
axis="1 0.3 0"/><geom type="capsule" fromto="0 0 0 0 1 0" size="0.05" mass="0.7"/>
<body name="c" pos="0 1 0"><joint name="s" type="slide" axis="0 1 0" damping="0.3"/>
<geom type="sphere" size="0.1" mass="0.2"/></body></body></body></worldbody>
<actuator><motor joint="j2" gear="2"/></actuator></mujoco>"""

#: steps of the runs: a trip count no other loop of these programs has
STEPS = 7
#: members of the structural test: a size no axis of one member has
MEMBERS = 40


@pytest.fixture
def batch_last_on(monkeypatch):
    """The joint run's batch-last rule switched on for the explicit steps (off by default,
    the batches on tiles of members off), in programs traced and compiled afresh (jaxmbd's
    program cache does not key the setting)."""
    monkeypatch.setattr(joint_run, "BATCH_LAST_STEPPERS", (RungeKutta4, SemiImplicitEuler))
    monkeypatch.setattr(joint_run, "BATCH_LANES_STEPPERS", ())
    monkeypatch.setenv("JAXMBD_NO_COMPILATION_CACHE", "1")
    jax.clear_caches()
    yield
    jax.clear_caches()


@pytest.fixture(scope="module")
def pendulum(tmp_path_factory):
    file = tmp_path_factory.mktemp("batch_last") / "pendulum.xml"
    file.write_text(PENDULUM)
    return mbd.load_model(file)


def _with_qvel(model, qvel):
    return eqx.tree_at(lambda m: m.tree.qvel_init, model, qvel)


# ---- the evaluator against jax.vmap ------------------------------------------------------


def _smooth(x, y, k):
    """Primitives of most rules of the evaluator: gathers with constant indices, dots (one
    or both operands batched), slices, pads, transposes, reshapes, reductions, a scan, a
    while loop with an unbatched and one with a batched condition, dynamic slices and
    updates."""
    idx = np.array([2, 0, 1, 1])
    a = x[idx] * 2.0 + jnp.sin(x[:3]).sum()
    M = jnp.outer(x[:3], y[1:4]) + jnp.eye(3)
    b = M @ y[:3] + jnp.asarray(np.arange(9.0).reshape(3, 3)) @ x[:3]
    c = jnp.pad(x, (1, 2)).reshape(3, 3).T.reshape(-1)
    d = jnp.cumsum(y) - jnp.sort(x)[::-1]

    def step(carry, xs):
        return carry * 0.9 + xs, carry.sum()

    carry, ys = jax.lax.scan(step, x[:2], jnp.stack([y[:2], y[2:4], y[1:3]]))
    w = jax.lax.fori_loop(0, 3, lambda i, v: v * 1.1 + x[i], y[0])
    n = jax.lax.while_loop(lambda s: s[0] < k, lambda s: (s[0] + 1, s[1] * 1.5), (0, y[1]))[1]
    g = jax.lax.dynamic_update_slice(y, jax.lax.dynamic_slice(x, (1,), (2,)), (k % 3,))
    return jnp.concatenate([a, b, c, d, carry, ys, jnp.stack([w, n]), g])


def _program(x, y, k):
    """:func:`_smooth` and conds with an unbatched and a batched index."""
    e = jax.lax.cond(k > 2, lambda: x[0] * y[1], lambda: y[0] - x[1])
    f = jax.lax.cond(x[0] > 0.0, lambda: x * 2.0, lambda: -y)
    return jnp.concatenate([_smooth(x, y, k), e[None], f])


def test_evaluator_equals_vmap():
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(5, 6)))
    y = jnp.asarray(rng.normal(size=(5, 6)))
    k = jnp.asarray([1, 3, 4, 0, 2])
    want = jax.vmap(_program)(x, y, k)
    got = jax.vmap(batch_last(_program))(x, y, k)
    np.testing.assert_allclose(got, want, rtol=0, atol=ROUND_OFF * np.abs(want).max())
    # a batched argument with unbatched ones, and chunks with padding
    got = jax.vmap(batch_last(_program, chunk=2), in_axes=(0, None, None))(x, y[0], 3)
    want = jax.vmap(_program, in_axes=(0, None, None))(x, y[0], 3)
    np.testing.assert_allclose(got, want, rtol=0, atol=ROUND_OFF * np.abs(want).max())
    # unbatched calls and derivatives are the plain function's
    np.testing.assert_array_equal(batch_last(_program)(x[0], y[0], 2), _program(x[0], y[0], 2))
    # (without the conds: JAX cannot transpose the JVP of a cond batched inside a custom_jvp
    # rule, jax 0.10.2, with or without batch_last)
    smooth = _smooth
    loss = lambda f: lambda x: jnp.sum(jax.vmap(f)(x, y, k) ** 2)  # noqa: E731
    np.testing.assert_allclose(
        jax.grad(loss(batch_last(smooth)))(x), jax.grad(loss(smooth))(x), rtol=ROUND_OFF
    )


# ---- sine and cosine ---------------------------------------------------------------------


def test_sin_cos_against_numpy():
    rng = np.random.default_rng(1)
    x = np.concatenate(
        [
            np.linspace(-20.0, 20.0, 40001),
            rng.uniform(-1e6, 1e6, 20000),
            rng.uniform(-1e-6, 1e-6, 1000),
            np.arange(-64, 65) * np.pi / 4,
            [0.0, -0.0, 2.0**29],
        ]
    )
    s, c = (np.asarray(v) for v in jax.jit(sin_cos)(jnp.asarray(x)))
    # within 1 ulp of libm's, and near the zeros (x ~ k pi / 2) within half an ulp of 1
    for got, want in ((s, np.sin(x)), (c, np.cos(x))):
        assert np.all(np.abs(got - want) <= np.maximum(np.spacing(np.abs(want)), 1.2e-16))
    assert np.all(np.isnan(np.asarray(sin_cos(jnp.asarray([np.inf, np.nan]))[0])))
    ds = jax.vmap(jax.grad(lambda t: sin_cos(t)[0]))(jnp.asarray(x[:50]))
    dc = jax.vmap(jax.grad(lambda t: sin_cos(t)[1]))(jnp.asarray(x[:50]))
    np.testing.assert_allclose(ds, c[:50], rtol=0, atol=2.3e-16)
    # an ulp of 1 (0 here, 5.6e-17 above): a floor tighter than ROUND_OFF, kept
    np.testing.assert_allclose(dc, -s[:50], rtol=0, atol=2.3e-16)


# ---- the joint formulation's batches -------------------------------------------------------


def _members(model, count):
    rng = np.random.default_rng(2)
    qvel = model.tree.qvel_init + rng.uniform(-2.0, 2.0, (count, model.tree.nv))
    mass = model.mass * rng.uniform(0.5, 1.5, (count, model.nb))
    members = mbd.stack_models([model] * count)
    members = eqx.tree_at(
        lambda m: (m.tree.qvel_init, m.mass), members, (jnp.asarray(qvel), jnp.asarray(mass))
    )
    controls = rng.uniform(-1.0, 1.0, (count, STEPS, model.nu))
    return members, controls


@pytest.mark.slow  # the batch-last rule is opt-in; the default batches: tests/test_batch.py
@pytest.mark.filterwarnings("ignore::jaxmbd.errors.AssemblyWarning")
def test_batch_equals_single_runs(pendulum, batch_last_on):
    """Members in several chunks (70 = 64 + 6, the last padded), each with its own masses,
    rates and controls: every state of every member equals its own single run."""
    count = 70
    members, controls = _members(pendulum, count)
    opts = dict(formulation="joint", integrator="rk", t_end=STEPS * 1e-3, h=1e-3)
    batch = mbd.simulate_batch(members, controls=controls, **opts)
    for k in (0, 63, count - 1):
        member = jax.tree_util.tree_map(lambda x, k=k: x[k], members)
        single = mbd.simulate(member, controls=controls[k], **opts)
        for key in ("qpos", "qvel", "r", "rdot", "rddot"):
            got, want = np.asarray(getattr(batch, key))[k], np.asarray(getattr(single, key))
            np.testing.assert_allclose(got, want, rtol=0, atol=1e-12, err_msg=f"{key} {k}")


@pytest.mark.slow  # the batch-last rule is opt-in
def test_gradient_of_batched_loss(pendulum, batch_last_on):
    """d/d qvel0 of a loss of a vmapped batch of runs, against central differences."""
    assert_batched_loss_gradient(pendulum, members=2, entries=((0, 0), (1, 2), (1, 1)))


def assert_batched_loss_gradient(model, *, members: int, entries, **options):
    """``jax.grad`` of the squared final positions of a ``vmap`` of ``members`` joint RK4
    runs (random initial rates) with respect to those rates, at ``entries`` (member,
    dof), against central differences to 1e-6."""
    opts = dict(formulation="joint", integrator="rk", t_end=STEPS * 1e-3, h=1e-3, **options)
    qvel = jnp.asarray(np.random.default_rng(3).uniform(-1.0, 1.0, (members, model.tree.nv)))

    def loss(qvel):
        def final(v):
            return mbd.simulate(_with_qvel(model, v), **opts).qpos[-1]

        return jnp.sum(jax.vmap(final)(qvel) ** 2)

    grad = np.asarray(jax.jit(jax.grad(loss))(qvel))
    f = jax.jit(loss)
    eps = 1e-6
    for k, i in entries:
        e = jnp.zeros_like(qvel).at[k, i].set(eps)
        fd = (float(f(qvel + e)) - float(f(qvel - e))) / (2 * eps)
        assert abs(grad[k, i] - fd) <= 1e-6 * max(abs(fd), 1.0), (k, i, grad[k, i], fd)


def _loop_computations(text: str, trip_count: int) -> list[str]:
    """The body of the ``while`` loop of ``trip_count`` iterations and every computation it
    calls (fusions, the stage loop), as HLO text."""
    computations = {}
    for computation in re.split(r"\n(?=\S)", text):
        computations[computation.split(" ", 1)[0].lstrip("%")] = computation
    count = re.compile(r'"known_trip_count":\{"n":"(\d+)"\}')
    bodies = [
        re.search(r"body=%([\w.\-]+)", line).group(1)
        for computation in computations.values()
        for line in computation.splitlines()
        if " while(" in line and (m := count.search(line)) and int(m.group(1)) == trip_count
    ]
    callee = re.compile(r"(?:to_apply|body|condition|calls|branch_computations)=\{?%([\w.\-]+)")
    seen, todo = [], list(bodies)
    while todo:
        name = todo.pop()
        if name in seen or name not in computations:
            continue
        seen.append(name)
        todo += callee.findall(computations[name])
    return [computations[name] for name in seen]


def test_batched_time_loop_calls_no_libm_sine(pendulum):
    """Structure, not time: the program ``simulate_batch`` compiles by default for a batch
    of the joint formulation has no ``sine``/``cosine`` in its time loop (XLA's CPU backend
    makes each a scalar libm call per element, 17-24 ns, more than the rest of a batched
    step): the hinges' rotations take :mod:`jaxmbd.compiled.trig`'s polynomials, which vectorise."""
    members, _ = _members(pendulum, MEMBERS)
    opts = _static_options(
        dict(formulation="joint", integrator="rk", contact="compliant", t_end=STEPS * 1e-3, h=1e-3)
    )
    chunk = _chunk_size(members, MEMBERS, None, 1, "cpu")
    text = _vmapped.lower("simulate", (members, None), opts, chunk).compile().compiled.as_text()
    loop = _loop_computations(text, STEPS + 1)  # n + 1 iterations: each state's start
    assert loop, "no time loop found"
    calls = [line.strip()[:120] for body in loop for line in body.splitlines()
             if re.search(r" (sine|cosine)\(", line)]  # fmt: skip
    assert not calls, f"libm sine/cosine in the batched time loop: {calls[:4]}"


def test_batched_time_loop_keeps_the_batch_minor(pendulum, batch_last_on):
    """Structure, not time: with the batch-last rule on, in the program ``simulate_batch``
    compiles for a batch of the joint formulation, every array of the time loop (its
    fusions, the stages' loop) that holds the members holds them in its minor axis, where a
    fusion's innermost loop runs over them in SIMD lanes (``jax.vmap``'s own batching puts
    them in the major axis: a member's 2-6 entries in the lanes, transposes between layouts
    in the fusions)."""
    members, _ = _members(pendulum, MEMBERS)
    opts = _static_options(
        dict(formulation="joint", integrator="rk", contact="compliant", t_end=STEPS * 1e-3, h=1e-3)
    )
    chunk = _chunk_size(members, MEMBERS, None, 1, "cpu", joint=True)
    text = _vmapped.lower("simulate", (members, None), opts, chunk).compile().compiled.as_text()
    loop = _loop_computations(text, STEPS + 1)  # n + 1 iterations: each state's start
    assert loop, "no time loop found"
    shapes = [
        [int(d) for d in dims.split(",")]
        for body in loop
        for dims in re.findall(r"f64\[([\d,]+)\]", body)
    ]
    with_members = [s for s in shapes if MEMBERS in s]
    assert with_members, "no array of the loop holds the members"
    major = [s for s in with_members if s[-1] != MEMBERS]
    assert not major, f"arrays with the members in a major axis: {major[:10]}"
