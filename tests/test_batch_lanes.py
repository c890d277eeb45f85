"""Batches of the joint formulation's explicit steps as per-member scalar code on tiles of
members (``jaxmbd.compiled.batch_lanes``, the default): the evaluator against ``jax.vmap``, a
batch against its members' single runs (own masses, rates and controls, one member that
fails), gradients of a batched loss against central differences, and the structure of the
compiled batch program (its time loop computes on tiles of members, the lanes minor)."""

import re

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from test_batch_last import (
    MEMBERS,
    PENDULUM,
    STEPS,
    _loop_computations,
    _members,
    _program,
    _smooth,
    assert_batched_loss_gradient,
)
from tolerances import ROUND_OFF

import jaxmbd as mbd
import jaxmbd.joint_space.run as joint_run
from jaxmbd.analysis.batch import _chunk_size, _static_options, _vmapped
from jaxmbd.compiled.batch_lanes import LANES, VMAP_CHUNK, batch_lanes
from jaxmbd.compiled.batch_last import batch_last
from jaxmbd.joint_space.steppers import RungeKutta4, SemiImplicitEuler

LANE_STEPPERS = (RungeKutta4, SemiImplicitEuler)


def test_the_explicit_steps_batch_on_tiles_by_default():
    assert joint_run.BATCH_LANES_STEPPERS == LANE_STEPPERS


def _scan_run(x, a):
    """A jitted time loop's shape: its stacked outputs carry ``vmap``'s batch in axis 1."""

    def step(c, _):
        c = c + 0.1 * jnp.sin(a * c)
        return c, c

    return jax.lax.scan(step, x, None, length=5)[1]


@pytest.mark.parametrize("rule", [batch_lanes, batch_last], ids=["lanes", "batch_last"])
def test_gradient_of_batched_loss_through_jit(rule):
    """``grad`` of a loss over ``vmap`` of a jitted rule-wrapped scan, with respect to the
    batched and an unbatched argument, equals the plain function's: the rule's JVP returns
    its outputs with the batch in the axis the primal's rule put it (without that, JAX
    read the stacked outputs' layout as the other one, and the gradient came out wrong,
    silently)."""
    x = jnp.asarray(np.random.default_rng(0).normal(size=(6, 3)))
    a = jnp.asarray(1.3)

    def loss(run):
        return lambda x, a: jnp.sum(jax.vmap(lambda x: run(x, a)[-1])(x) ** 2)

    got = jax.grad(loss(jax.jit(rule(_scan_run))), argnums=(0, 1))(x, a)
    want = jax.grad(loss(_scan_run), argnums=(0, 1))(x, a)
    np.testing.assert_allclose(got[0], want[0], rtol=0, atol=ROUND_OFF * np.abs(want[0]).max())
    np.testing.assert_allclose(got[1], want[1], rtol=ROUND_OFF)


@pytest.fixture(scope="module")
def pendulum(tmp_path_factory):
    file = tmp_path_factory.mktemp("batch_lanes") / "pendulum.xml"
    file.write_text(PENDULUM)
    return mbd.load_model(file)


@pytest.mark.slow  # the default batches' own tests below cover its rules on a model
def test_evaluator_equals_vmap():
    """Every rule of the evaluator (scalar rules, rearrangements at trace time, whole-array
    rules for loops and conds), with padding (5 members in tiles of 4) and chunks of one
    tile; unbatched calls and derivatives are the plain function's."""
    rng = np.random.default_rng(0)
    x = jnp.asarray(rng.normal(size=(5, 6)))
    y = jnp.asarray(rng.normal(size=(5, 6)))
    k = jnp.asarray([1, 3, 4, 0, 2])
    want = jax.vmap(_program)(x, y, k)
    # reductions and dots sum in their own order: round-off apart
    np.testing.assert_allclose(jax.vmap(batch_lanes(_program))(x, y, k), want, atol=1e-14)
    got = jax.vmap(batch_lanes(_program, chunk=1), in_axes=(0, None, None))(x, y[0], 3)
    want = jax.vmap(_program, in_axes=(0, None, None))(x, y[0], 3)
    np.testing.assert_allclose(got, want, atol=1e-14)
    np.testing.assert_array_equal(batch_lanes(_program)(x[0], y[0], 2), _program(x[0], y[0], 2))
    loss = lambda f: lambda x: jnp.sum(jax.vmap(f)(x, y, k) ** 2)  # noqa: E731
    np.testing.assert_allclose(
        jax.grad(loss(batch_lanes(_smooth)))(x), jax.grad(loss(_smooth))(x), rtol=1e-13
    )


@pytest.mark.filterwarnings("ignore::jaxmbd.errors.AssemblyWarning")
def test_batch_equals_single_runs(pendulum, monkeypatch):
    """Ten members (three tiles, the last padded), each with its own masses, rates and
    controls, stepped a tile at a time, one of them with a NaN rate: every state of every
    other member equals its own single run to round-off, and the failing one fails alone."""
    monkeypatch.setattr(joint_run, "BATCH_LANES_CHUNK", 1)
    monkeypatch.setenv("JAXMBD_NO_COMPILATION_CACHE", "1")
    jax.clear_caches()
    count, bad = 10, 6
    members, controls = _members(pendulum, count)
    qvel = members.tree.qvel_init.at[bad, 0].set(jnp.nan)
    members = eqx.tree_at(lambda m: m.tree.qvel_init, members, qvel)
    opts = dict(formulation="joint", integrator="rkmk", t_end=STEPS * 1e-3, h=1e-3)
    batch = mbd.simulate_batch(members, controls=controls, **opts)
    jax.clear_caches()
    status = np.asarray(batch.status)
    assert np.any(status[bad] != 0)
    assert np.all(np.delete(status, bad, axis=0) == 0)
    for k in (0, 5, count - 1):
        member = jax.tree_util.tree_map(lambda x, k=k: x[k], members)
        single = mbd.simulate(member, controls=controls[k], **opts)
        for key in ("qpos", "qvel", "r", "rdot", "rddot", "omega"):
            got, want = np.asarray(getattr(batch, key))[k], np.asarray(getattr(single, key))
            np.testing.assert_allclose(got, want, rtol=0, atol=ROUND_OFF * np.abs(want).max(),
                                       err_msg=f"{key} {k}")  # fmt: skip


@pytest.mark.slow  # the derivative is the plain function's (test_evaluator_equals_vmap)
@pytest.mark.parametrize("throw", [True, False])
def test_gradient_of_batched_loss(pendulum, throw):
    """d/d qvel0 of a loss of a vmapped batch of runs, against central differences, with
    and without the run's error checks in the program."""
    assert_batched_loss_gradient(pendulum, members=5, entries=((0, 0), (4, 2), (1, 1)), throw=throw)


def test_batched_time_loop_computes_on_tiles_of_members(pendulum):
    """Structure, not time: in the program ``simulate_batch`` compiles by default for a
    batch of the joint formulation (40 members: 10 tiles of 4), every array of the time
    loop (its fusions, the stages' loop) that holds the members holds them as its two
    minor axes, tiles then lanes (a gather by a member's own index: both in one), and most
    of its fusions compute one scalar of every member: each such fusion is an elementwise
    loop whose innermost axis is a SIMD register of members, with every entry of a member
    computed once (``jax.vmap`` puts the members in the major axis, a member's 2-6
    entries in the innermost loop)."""
    members, _ = _members(pendulum, MEMBERS)
    opts = _static_options(
        dict(formulation="joint", integrator="rk", contact="none", t_end=STEPS * 1e-3, h=1e-3)
    )
    chunk = _chunk_size(members, MEMBERS, None, 1, "cpu", joint=True)
    text = _vmapped.lower("simulate", (members, None), opts, chunk).compile().compiled.as_text()
    loop = _loop_computations(text, STEPS + 1)  # n + 1 iterations: each state's start
    assert loop, "no time loop found"
    tiles = (MEMBERS // LANES, LANES)
    shapes = [
        tuple(int(d) for d in dims.split(","))
        for body in loop
        for dims in re.findall(r"f64\[([\d,]+)\]", body)
    ]
    with_members = [s for s in shapes if MEMBERS in s or s[-2:] == tiles]
    assert with_members, "no array of the loop holds the members"

    def minor(s):  # the members in the minor axes (a gather's index: flattened, unit axes)
        while len(s) > 1 and s[-1] == 1:
            s = s[:-1]
        return s[-2:] == tiles or s[-1] == MEMBERS

    other = [s for s in with_members if not minor(s)]
    assert not other, f"arrays that hold the members otherwise than in tiles: {other[:10]}"
    fusions = [
        line
        for body in loop
        for line in body.splitlines()
        if " fusion(" in line and "f64[" in line.split("=", 1)[1].split("fusion(", 1)[0]
    ]
    out = [re.search(r"f64\[([\d,]+)\]", f.split("fusion(", 1)[0]).group(1) for f in fusions]
    scalar = [d for d in out if tuple(int(n) for n in d.split(",") if n != "1") == tiles]
    assert len(scalar) >= 3 * len(fusions) // 4, (len(scalar), len(fusions))


@pytest.mark.parametrize(("too_large", "members"), [("vmap", 5), ("vmap", 20), ("map", 5)])
def test_a_program_too_large_for_tiles(monkeypatch, too_large, members):
    """A program over the size bound runs its batch by ``jax.vmap`` (on the CPU a batch of
    more than ``VMAP_CHUNK`` members in chunks of that many: a loop over the chunks around
    the time loop, the remainder after it) or one member after another (``lax.map``: a loop
    over the members), with the same values; an unknown schedule is refused."""
    monkeypatch.setattr("jaxmbd.compiled.batch_lanes.MAX_ENTRIES_ESTIMATE", 0)
    x = jnp.asarray(np.random.default_rng(2).normal(size=(members, 3)))
    a = jnp.asarray(0.7)
    f = jax.vmap(batch_lanes(_scan_run, too_large=too_large), in_axes=(0, None))
    want = jax.vmap(_scan_run, in_axes=(0, None))(x, a)
    np.testing.assert_allclose(f(x, a), want, rtol=0, atol=ROUND_OFF * np.abs(want).max())
    program = jax.make_jaxpr(f)(x, a).pretty_print()
    lengths = sorted(int(n) for n in re.findall(r"length=(\d+)", program))
    steps = 5  # _scan_run's time loop
    chunked = [members // VMAP_CHUNK, steps, steps]  # the chunks' loop, its body's, the rest's
    expected = {("vmap", 5): [steps], ("map", 5): [steps, members],
                ("vmap", 20): chunked}[too_large, members]  # fmt: skip
    if jax.default_backend() != "cpu" and too_large == "vmap":
        expected = [steps]
    assert lengths == sorted(expected), program
    with pytest.raises(ValueError, match="too_large"):
        batch_lanes(_scan_run, too_large="chunks")


def test_an_entry_read_by_several_equations_is_computed_once(pendulum, monkeypatch):
    """Structure, not time: the batch program's time loop (the pendulum's, as above) holds
    each entry that several equations read once, as a conditional's buffer; without the
    groups XLA's CPU fusion computes such an entry again in every fusion that reads it
    (3.2x the arithmetic instructions here: 13,882 against 4,322)."""
    import jaxmbd.compiled.batch_lanes as lanes

    members, _ = _members(pendulum, MEMBERS)
    opts = _static_options(
        dict(formulation="joint", integrator="rk", contact="none", t_end=STEPS * 1e-3, h=1e-3)
    )
    chunk = _chunk_size(members, MEMBERS, None, 1, "cpu", joint=True)
    arithmetic = re.compile(r" (multiply|add|subtract|divide|negate)\(")

    def loop_arithmetic(group):
        monkeypatch.setattr(lanes, "MATERIALIZE_GROUP", group)
        jax.clear_caches()
        compiled = _vmapped.lower("simulate", (members, None), opts, chunk).compile()
        loop = _loop_computations(compiled.compiled.as_text(), STEPS + 1)
        assert loop, "no time loop found"
        return sum(len(arithmetic.findall(body)) for body in loop)

    grouped = loop_arithmetic(lanes.MATERIALIZE_GROUP)
    if jax.default_backend() == "cpu":
        assert grouped < 0.5 * loop_arithmetic(None), grouped


def test_members_of_a_program_too_large_for_tiles_map_empty_leaves(monkeypatch):
    """More members than VMAP_CHUNK of a program too large for the tiles, with empty arrays
    in and out (dm_control's ball_in_cup has empty constraint-row arrays): ``lax.map`` in
    chunks reshaped the empty leaves into chunks and divided by zero."""
    from jaxmbd.compiled import batch_lanes as lanes_module

    monkeypatch.setattr(lanes_module, "MAX_ENTRIES_ESTIMATE", 0)  # every program too large
    members = lanes_module.VMAP_CHUNK + 1
    f = lanes_module.batch_lanes(lambda x, empty: (jnp.sin(x) * 2.0, empty * 2.0))
    x = jnp.linspace(0.0, 1.0, members * 3).reshape(members, 3)
    y, empty = jax.vmap(f)(x, jnp.zeros((members, 0, 3)))
    np.testing.assert_array_equal(y, jnp.sin(x) * 2.0)
    assert empty.shape == (members, 0, 3)


REARRANGEMENTS = {
    "reshape": lambda x: x.reshape(6, 4),
    "transpose": lambda x: x.transpose(2, 0, 1),
    "squeeze": lambda x: jax.lax.squeeze(x[:, :1, :], (1,)),
    "rev": lambda x: jax.lax.rev(x, (0, 2)),
    "broadcast_in_dim": lambda x: jax.lax.broadcast_in_dim(x, (2, 5, 3, 4), (0, 2, 3)),
    "slice": lambda x: x[1:, ::2, 1:4:2],
    "concatenate": lambda x: jnp.concatenate([x, x[:, :1]], axis=1),
    "split": lambda x: jnp.split(x, [1, 3], axis=2),
    "dynamic_slice": lambda x: jax.lax.dynamic_slice(x, (1, 2, 3), (1, 1, 2)),
}


@pytest.mark.parametrize("name", sorted(REARRANGEMENTS))
def test_index_rearrangements_by_numpy_equal_xla(name):
    """The rearranging primitives that batch_lanes evaluates on entry indices by NumPy
    give XLA's result on the same index arrays (dynamic_slice's start clamped as XLA
    clamps it)."""
    from jaxmbd.compiled.batch_lanes import _numpy_rearrangement

    x = np.arange(24, dtype=np.int32).reshape(2, 3, 4)
    jaxpr = jax.make_jaxpr(REARRANGEMENTS[name])(x).jaxpr
    env = {jaxpr.invars[0]: x}
    checked = 0
    for eqn in jaxpr.eqns:
        args = [np.asarray(v.val) if hasattr(v, "val") else env[v] for v in eqn.invars]
        params = eqn.primitive.get_bind_params(eqn.params)
        theirs = eqn.primitive.bind(*map(jnp.asarray, args), **params)
        theirs = [np.asarray(t) for t in (theirs if eqn.primitive.multiple_results else [theirs])]
        if eqn.primitive.name == name:
            ours = _numpy_rearrangement(name, args, params)
            assert len(ours) == len(theirs)
            for a, b in zip(ours, theirs, strict=True):
                np.testing.assert_array_equal(a, b)
            checked += 1
        env.update(zip(eqn.outvars, theirs, strict=True))
    assert checked, [e.primitive.name for e in jaxpr.eqns]
