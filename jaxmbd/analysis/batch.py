"""Batches of models: stacking, vmapped analyses, and sharding across devices.

A batch is a Model whose array leaves carry a leading batch axis (same static topology).
``simulate_batch``/``kinematics_batch`` run ``jit(vmap(analysis))`` through one module-level
compiled function keyed by (analysis, topology, options, batch shape, devices): the first
call compiles, later calls with new parameter values (masses, initial states, drivers, ...)
reuse the compiled program; so do new per-member controls and new parameters of a shared
policy (``simulate_batch(models, policy=pi)``, the parameters dynamic). When several
devices are present (e.g. two host devices from
``XLA_FLAGS=--xla_force_host_platform_device_count=2``, set before JAX starts) the batch is
split across them by ``shard_map`` (padded to a multiple of the device count, the padding
dropped after; a batch smaller than the device count uses as many devices as members): one
independent vmapped program per device. On a CPU large batches run in chunks on each
device (see ``simulate_batch``'s ``chunk``), so throughput does not fall as the batch
outgrows the cache; on a GPU the whole batch is one vmap, and the batching rules of the
Newton solves take their GPU paths (``jaxmbd.compiled.batching.cpu_or_accelerator``).

Across processes (``jax.distributed.initialize``, then ``devices=jax.devices()`` or a
``jax.sharding.Mesh`` spanning every process; ``docs/guide/distributed.md``) the same
``shard_map`` runs inside one ``jax.jit`` per process whose inputs are replicated global
arrays (every process passes the same batch; each device slices its own members, no
communication) and whose outputs are gathered by XLA's collectives into replicated global
arrays (``gather=True``) or left sharded over the batch (``gather=False``). The gradient of a
loss of such a result comes back replicated, the same in every process.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Sequence

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
from jax.experimental import multihost_utils
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from .. import _config  # noqa: F401
from .._checks import is_traced, resolve_throw
from .._parameter_checks import as_float64
from .._results import code_message
from ..compiled.batch_lanes import chunked_map
from ..compiled.jit import XLA_OPTIONS, _at_top_level, _options_accepted, jit
from ..errors import ModelError, SolverError
from ..formulations import get_formulation
from ..joint_space import run as joint_run
from ..joint_space.steppers import get_stepper
from ..linear import small
from ..model import Model
from ._stepping import num_steps
from .kinematics import kinematics
from .plan import default_formulation, run_defaults, soft_equality_default, treated_model
from .simulation import simulate

_ANALYSES = {"simulate": simulate, "kinematics": kinematics}


def stack_models(models: Sequence[Model]) -> Model:
    """One batched Model from models of identical topology (leaves stacked on axis 0)."""
    models = list(models)
    if not models:
        raise ModelError("stack_models: empty list")
    structure = jax.tree_util.tree_structure(models[0])
    for k, m in enumerate(models[1:], 1):
        if jax.tree_util.tree_structure(m) != structure:
            raise ModelError(f"stack_models: model {k} has a different topology than model 0")
    return jax.tree_util.tree_map(lambda *xs: jnp.stack(xs), *models)


def batch_size(models: Model) -> int:
    sizes = {leaf.shape[0] for leaf in jax.tree_util.tree_leaves(models) if hasattr(leaf, "shape")}
    if len(sizes) != 1:
        raise ModelError(f"batched model: leaves disagree on the batch size {sorted(sizes)}")
    return sizes.pop()


def _members(analysis: str, members, options: dict, chunk: int | None):
    """``analysis`` of every member on this device: one vmap of the whole batch, or, with
    ``chunk``, vmaps of ``chunk`` members run one after the other (``lax.map``): the
    per-member state of a chunk stays in cache, and each chunk's Newton loops run only as
    long as its own slowest member needs. ``members`` is (models, per-member controls or
    None); the options (a shared policy or u(t) among them) are closed over: shared by
    every member, their arrays dynamic arguments of the compiled program."""
    fn = _ANALYSES[analysis]

    def one(member):
        model, controls = member
        return fn(model, **options) if controls is None else fn(model, controls=controls, **options)

    if chunk is None:
        return eqx.filter_vmap(one)(members)
    return _on_arrays(lambda arrays, g: chunked_map(g, arrays, chunk), one, members)


def _on_arrays(transform, fn, members):
    """``transform(arrays, g)`` for the array leaves of ``members``, where ``g`` runs ``fn``
    on arrays recombined with the static leaves and returns the array leaves of its
    output (what ``lax.map`` and ``shard_map`` can carry); the output's static leaves are
    put back after."""
    arrays, static = eqx.partition(members, eqx.is_array)
    out_static = []

    def on_arrays(arrays_):
        out_arrays, rest = eqx.partition(fn(eqx.combine(arrays_, static)), eqx.is_array)
        out_static.append(rest)
        return out_arrays

    out = transform(arrays, on_arrays)
    return eqx.combine(out, out_static[-1])


#: XLA options of the batch programs, beside jaxmbd's own (:mod:`jaxmbd.compiled.jit`): no YNNPACK
#: library fusions. Under ``vmap`` a member's tiny reductions and products with constant
#: matrices (``jnp.max`` of a residual, ``ancestors @ x`` of the joint formulation's body
#: accelerations) grow the batch into their shapes, and XLA's CPU compiler hands them to
#: YNNPACK as library fusions, which its small-while-loop pass never hoists: the time loop
#: of a batch then ran as XLA thunks while the same member alone ran as one native loop.
#: Without them those ops are XLA's own loops (a plain ``dot`` hoists), and each chunk's
#: time loop compiles natively (``tests/test_batch.py``, the structural test).
BATCH_XLA_OPTIONS = {"xla_cpu_experimental_ynn_fusion_type": ""}
_BATCH_EXTRA = tuple(sorted(BATCH_XLA_OPTIONS.items()))


@functools.partial(jit, xla_options=BATCH_XLA_OPTIONS)
def _vmapped(analysis: str, members, options: dict, chunk: int | None):
    """One compiled program per (analysis, static model fields, options, shapes, chunk):
    ``analysis`` and the options' non-array leaves are static; the model's arrays, the
    per-member controls and the options' arrays (a policy's parameters) are dynamic."""
    return _members(analysis, members, options, chunk)


def _static_options(options: dict) -> dict:
    """Options as jit-cache keys: the time grid must be concrete (it fixes the number of
    steps); NumPy/JAX scalars become Python floats so equal values hit the same program."""
    out = dict(options, throw=False, progress=None)
    out.pop("check", None)
    for key in ("t_end", "h"):
        if key in out and out[key] is not None:
            out[key] = float(out[key])
    return out


@functools.partial(jit, xla_options=BATCH_XLA_OPTIONS)
def _vmapped_per_device(analysis: str, members, options: dict, devices: tuple, chunk: int | None):
    """``_vmapped`` with the batch split over ``devices`` by ``shard_map``: each device runs
    the vmapped program on its own members, with no communication. (Sharding the inputs of
    one jit instead lets the partitioner synchronise the devices at every Newton iteration
    over the batch-wide loop conditions: slower than one device in a measurement.)"""
    mesh = Mesh(np.asarray(devices), ("batch",))
    return _on_arrays(
        lambda arrays, local: jax.shard_map(
            local,
            mesh=mesh,
            in_specs=PartitionSpec("batch"),
            out_specs=PartitionSpec("batch"),
            check_vma=False,
        )(arrays),
        lambda local: _members(analysis, local, options, chunk),
        members,
    )


#: Default chunk of a small model on a CPU (Newton unknowns n = 6 nb + 2 nc up to
#: ``jaxmbd.linear.small.SMALL_MAX``, whose steps use the elementwise kernels): members per
#: vmap. Chosen by measurement (``python -m benchmarks.batch_chunks``, the table in
#: ``benchmarks/results/batch/batch_chunks.md``): XLA compiles a time loop as one native
#: loop only while its body accesses fewer bytes than the hoisting threshold
#: (:mod:`jaxmbd.compiled.xla_flags`), and a vmapped body grows with its members. The double
#: pendulum's rA gen_alpha step hoists in chunks of up to 64 members, not 128 or 256; but
#: LLVM's compile of the hoisted loop grows with the chunk (8: 53 s, 32: 67 s, 64: 559 s
#: of XLA compile on the loaded 2-core machine), and the run gains nothing past 8-16
#: members (each member's data is a few rows of 2-12 entries: the batch axis leads,
#: so the SIMD lanes see a member's short rows, not the members).
HOISTED_CHUNK = 8

#: Default chunk budget of a larger model (steps not hoisted either way): the members of a
#: chunk hold their Newton matrices (n^2 doubles each, n = 6 nb + 2 nc at most) within
#: about this many bytes, the size of this machine's L2 caches together. With d host
#: devices at once, each device's chunks get 1 / d^2 of it: the d programs share the
#: caches and the memory bus, and each chunk's stored steps pass through them too.
#: Measured before small models got :data:`HOISTED_CHUNK` (scratch runs of
#: simulate_batch, 1 s at h = 1e-3 unless stated):
#:
#: * one device, double pendulum gen_alpha (n = 32): batch 256 175-179k model-steps/s
#:   whole, 152k in chunks of 128, 135k in chunks of 16;
#: * two host devices, throughput at batch 1024 over that at batch 256 (median of the
#:   per-round ratios of alternating calls): double pendulum gen_alpha 0.95 with chunks of
#:   256 (a 2 MiB budget per device), 0.99 with 128; backward_euler (n = 22) 0.91 with 512,
#:   0.98 with 256; slider crank backward_euler (n = 36, 0.3 s) at batch 256 126k with
#:   chunks of 128 and 155-157k with 64 or 32; slider crank gen_alpha (n = 54) batch
#:   64 -> 1024 flat with chunks of 32 or 64 (66-70k, 0.3 s).
CHUNK_BYTES = 2 * 2**20


def _chunk_size(
    models: Model,
    per_device: int,
    chunk,
    devices: int = 1,
    platform: str = "cpu",
    joint: bool = False,
) -> int | None:
    """Members per vmap on a device (None: all of its members at once): the caller's
    choice, else on a CPU :data:`HOISTED_CHUNK` for a small model (n = 6 nb + 2 nc up to
    ``SMALL_MAX``: its chunk's time loop compiles to one native loop) and for a larger
    one the largest power of two whose Newton matrices fit in the device's share of
    CHUNK_BYTES (1 / devices^2 of it), and on a GPU (any other platform) the whole
    batch: each kernel then runs over every member, and a GPU's time per step is mostly
    kernel launches, nearly independent of the members per kernel. ``joint``: a run of the
    joint formulation with an explicit step, whose time loop chunks its batch itself
    (:data:`jaxmbd.joint_space.run.BATCH_LANES_CHUNK` tiles of members, or batch-last
    :data:`~jaxmbd.joint_space.run.BATCH_CHUNK` members a chunk): the whole batch."""
    if chunk is None and (platform != "cpu" or joint):
        return None
    if chunk is None:
        n = 6 * models.nb + 2 * models.nc
        if n <= small.SMALL_MAX:
            chunk = HOISTED_CHUNK
        else:
            budget = CHUNK_BYTES // max(devices, 1) ** 2
            chunk = max(8, 2 ** int(np.log2(max(budget // (8 * n * n), 1))))
    elif isinstance(chunk, bool) or not isinstance(chunk, (int, np.integer)) or chunk < 1:
        raise ValueError(f"chunk must be a positive integer (members per vmap), got {chunk!r}")
    return None if chunk >= per_device else int(chunk)


def _is_joint(models: Model, options: dict) -> bool:
    """Whether ``simulate`` runs the batch in the joint formulation with a step whose
    batches chunk themselves (on tiles of members,
    :data:`jaxmbd.joint_space.run.BATCH_LANES_STEPPERS`, or batch-last,
    :data:`~jaxmbd.joint_space.run.BATCH_LAST_STEPPERS`): asked for, or the default
    formulation and integrator of the model."""
    steppers = (*joint_run.BATCH_LANES_STEPPERS, *joint_run.BATCH_LAST_STEPPERS)
    if not steppers:
        return False
    if options.get("contact") == "hard" or options.get("limits") == "hard":
        return False
    try:
        formulation = options.get("formulation")
        integrator = options.get("integrator")
        # the first member as simulate treats it: the batch's arrays lead with members
        arrays, static = eqx.partition(models, eqx.is_array)
        first = eqx.combine(jax.tree_util.tree_map(_one_member, arrays), static)
        treatments = run_defaults(
            first, formulation=formulation, contact=options.get("contact"),
            limits=options.get("limits"), equality=options.get("equality"),
        )  # fmt: skip
        contact, limits, _ = treatments
        equality = soft_equality_default(first, *treatments)
        first = treated_model(first, contact=contact, limits=limits, equality=equality,
                              where="simulate_batch", hard_and_soft=True).model  # fmt: skip
        if formulation is None:
            formulation = default_formulation(first, integrator, options.get("options"))
        form = get_formulation(formulation)
        if not form.runs_in_joint_space:
            return False
        if integrator is None:
            integrator = form.integrator_of(first)
        return isinstance(get_stepper(integrator), steppers)
    except (ValueError, TypeError, ModelError):  # simulate itself says what is wrong
        return False


def _one_member(x):
    """One member of a batched leaf, read on the host where it is concrete: slicing a
    device array eagerly would compile a program per shape (and a sharded one may not be
    addressable from this process); the structure is all the caller needs."""
    if isinstance(x, jax.Array) and not isinstance(x, jax.core.Tracer):
        return np.asarray(x.addressable_data(0))[0]
    return x[0]


def _device_list(devices) -> list:
    """The devices of ``devices=``: None (all of them, every process's), a sequence of
    devices, or a ``jax.sharding.Mesh`` (its devices in order, whatever its axes)."""
    if devices is None:
        return list(jax.devices())
    if isinstance(devices, Mesh):
        return list(devices.devices.flat)
    devices = list(devices)
    if not devices or not all(isinstance(d, jax.Device) for d in devices):
        raise ValueError(
            "devices= must be a non-empty sequence of jax devices (jax.devices(), "
            f"jax.local_devices()) or a jax.sharding.Mesh, got {devices!r}"
        )
    return devices


def _sharded_map(analysis: str, members, devices, options: dict, chunk, gather: bool = True):
    models = members[0]
    devices = _device_list(devices)
    options = _static_options(options)
    n = batch_size(models)
    if {d.process_index for d in devices} != {jax.process_index()}:
        return _across_processes(analysis, members, devices, options, chunk, gather)
    devices = devices[: max(1, min(n, len(devices)))]  # no device runs padding alone
    per_device = -(-n // len(devices))
    joint = analysis == "simulate" and _is_joint(models, options)
    chunk = _chunk_size(models, per_device, chunk, len(devices), devices[0].platform, joint)
    if len(devices) == 1:
        return _vmapped(analysis, members, options, chunk)
    pad = (-n) % len(devices)
    if pad:
        members = jax.tree_util.tree_map(
            lambda x: jnp.concatenate([x, jnp.repeat(x[-1:], pad, axis=0)]), members
        )
    out = _vmapped_per_device(analysis, members, options, tuple(devices), chunk)
    return jax.tree_util.tree_map(lambda x: x[:n], out) if pad else out


def _across_processes(analysis: str, members, devices: list, options: dict, chunk, gather):
    """The batch on devices of several processes (multi-controller ``jax.distributed``):
    every process calls this with the same batch, and runs the same compiled program."""
    me = jax.process_index()
    if not any(d.process_index == me for d in devices):
        raise ValueError(
            f"{analysis}_batch: devices= holds no device of this process ({me}); every "
            "process must pass the same devices, spanning all of them (jax.devices())"
        )
    if len(set(devices)) != len(devices):
        raise ValueError(f"{analysis}_batch: devices= lists a device twice")
    models = members[0]
    n = batch_size(models)
    pad = (-n) % len(devices)  # every device holds members: each process runs its share
    if pad and not gather:
        raise ValueError(
            f"{analysis}_batch: gather=False needs a batch divisible by the {len(devices)} "
            f"devices (each holds an equal shard), got {n} members; pad the batch or gather"
        )
    local = sum(d.process_index == me for d in devices)
    joint = analysis == "simulate" and _is_joint(models, options)
    chunk = _chunk_size(models, -(-n // len(devices)), chunk, local, devices[0].platform, joint)
    _open_collectives(tuple(devices))  # in step, before anything of this call compiles
    dynamic, static = eqx.partition((members, options), eqx.is_array)
    leaves, treedef = jax.tree_util.tree_flatten(dynamic)
    static_leaves, static_def = jax.tree_util.tree_flatten(static)
    avals = tuple((jnp.shape(x), jnp.result_type(x)) for x in leaves)
    program = _mesh_program(
        analysis, treedef, static_def, tuple(static_leaves), avals, tuple(devices), chunk, pad
    )
    top = _at_top_level is not None and _at_top_level() and _options_accepted(_BATCH_EXTRA)
    out = (program.tuned if top else program.plain)(*leaves)
    if gather:  # one all-gather after the run, the padding dropped
        out = _gathered(tuple(devices), n)(out)
    return eqx.combine(out, program.out_static[-1])


class _MeshProgram:
    """A multi-process program: ``plain``/``tuned`` jits (XLA options only at top level, as
    in :func:`jaxmbd.jit`) and the static leaves of its output, recorded when traced."""

    def __init__(self, fn, in_sharding, out_sharding):
        self.out_static = []
        kwargs = dict(in_shardings=in_sharding, out_shardings=out_sharding)
        self.plain = jax.jit(fn, **kwargs)
        self.tuned = jax.jit(fn, compiler_options={**XLA_OPTIONS, **BATCH_XLA_OPTIONS}, **kwargs)


@functools.lru_cache(maxsize=32)
def _mesh_program(
    analysis, treedef, static_def, static_leaves, avals, devices, chunk, pad
) -> _MeshProgram:
    """One jit per (analysis, static model fields and options, shapes, devices, chunk): its
    inputs (every array leaf of the members and options) are replicated over the mesh, so
    each process hands over its own copy of the batch without a transfer, and a gradient
    with respect to them comes back replicated (XLA sums the devices' shares); inside,
    ``shard_map`` gives each device its members with no communication. The outputs stay
    sharded over the batch axis (padding included); ``gather=True`` and ``False`` share
    this program."""
    mesh = Mesh(np.asarray(devices), ("batch",))
    static = jax.tree_util.tree_unflatten(static_def, static_leaves)

    def run(*leaves):
        members, options = eqx.combine(jax.tree_util.tree_unflatten(treedef, leaves), static)
        if pad:
            members = jax.tree_util.tree_map(
                lambda x: jnp.concatenate([x, jnp.repeat(x[-1:], pad, axis=0)]), members
            )
        out = _on_arrays(
            lambda arrays, local: jax.shard_map(
                local, mesh=mesh, in_specs=PartitionSpec("batch"),
                out_specs=PartitionSpec("batch"), check_vma=False,
            )(arrays),
            lambda local: _members(analysis, local, options, chunk),
            members,
        )  # fmt: skip
        arrays, rest = eqx.partition(out, eqx.is_array)
        program.out_static.append(rest)
        return arrays

    program = _MeshProgram(
        run, NamedSharding(mesh, PartitionSpec()), NamedSharding(mesh, PartitionSpec("batch"))
    )
    return program


@functools.lru_cache(maxsize=32)
def _gathered(devices: tuple, n: int):
    """The all-gather of ``gather=True``: the first ``n`` members, replicated on every
    device of every process (a small program of its own, so that ``gather=False`` runs
    the same simulation program)."""
    mesh = Mesh(np.asarray(devices), ("batch",))
    return jax.jit(  # in_shardings: its transpose hands the program sharded cotangents
        lambda arrays: jax.tree_util.tree_map(lambda x: x[:n], arrays),
        in_shardings=NamedSharding(mesh, PartitionSpec("batch")),
        out_shardings=NamedSharding(mesh, PartitionSpec()),
    )


_BARRIERS = itertools.count()
_OPENED: set[tuple] = set()


def _open_collectives(devices: tuple):
    """The first use of a set of devices in this process: a barrier, then one tiny
    all-gather over them. On CPUs gloo connects the processes at their first collective
    over a set of devices and waits only 30 s there for the others ('Gloo context
    initialization failed'); once connected, a collective waits as long as the other
    process needs (measured: 45 s). A first compilation can leave one process minutes
    behind another (a loaded 2-core machine), also when the program is traced inside the
    user's own ``jax.jit`` and compiled after it: so the connection is made here, at
    trace time, while every process stands at the same barrier."""
    if devices in _OPENED:
        return
    _wait_for_every_process()
    mesh = Mesh(np.asarray(devices), ("batch",))
    zeros = np.zeros(len(devices))
    with jax.ensure_compile_time_eval():  # run now, also while a jit of the user traces
        x = jax.make_array_from_callback(
            zeros.shape, NamedSharding(mesh, PartitionSpec("batch")), lambda i: zeros[i]
        )
        gathered = jax.jit(lambda a: a, out_shardings=NamedSharding(mesh, PartitionSpec()))
        jax.block_until_ready(gathered(x))
    _OPENED.add(devices)


def _wait_for_every_process(timeout_s: float = 3600.0):
    """A barrier of the distributed runtime (not a collective): every process calls this
    in the same order, so the counter names the same barrier."""
    try:
        from jax._src import distributed
    except ImportError:  # pragma: no cover
        return
    client = distributed.global_state.client
    if client is not None:
        client.wait_at_barrier(f"jaxmbd.analysis.batch.{next(_BARRIERS)}", int(timeout_s * 1000))


def _to_host(x) -> np.ndarray:
    """A concrete array on the host, also when it is sharded over other processes' devices
    (``gather=False``): then every process must call this (an all-gather)."""
    if isinstance(x, jax.Array) and not (x.is_fully_addressable or x.is_fully_replicated):
        return np.asarray(multihost_utils.process_allgather(x, tiled=True))
    return np.asarray(x)


def _member_controls(models: Model, controls, options: dict):
    """Per-member open-loop controls of a batch: an array with a leading batch axis, (B, N,
    nu) (one row per step) or (B, nu) (one constant per member), returned as (B, N, nu) to
    be mapped with the members (both forms run one compiled program); a function u(t)
    stays in ``options``, shared by every member (None: None). Clear errors for a wrong
    shape, non-finite values and a model without actuators."""
    if controls is None:
        return None
    nu = models.nu
    if nu == 0:
        raise ValueError(f"simulate_batch: controls= given, but model '{models.name}' has no "
                         "actuators")  # fmt: skip
    if callable(controls):  # shared: simulate checks and evaluates it per member
        options["controls"] = controls
        return None
    if "t_end" not in options or "h" not in options:
        raise TypeError("simulate_batch: t_end= and h= are required (the controls' rows are steps)")
    b = batch_size(models)
    n = num_steps(options["t_end"], options["h"])
    names = models.actuators.actuator_names
    # concrete controls are checked and broadcast in NumPy: no JAX op compiles for them
    xp = jnp if is_traced(controls) else np
    u = xp.asarray(controls, dtype=xp.float64)
    if u.shape not in ((b, n, nu), (b, nu)):
        raise ValueError(
            f"simulate_batch: controls has shape {u.shape}; expected ({b}, {n}, {nu}) (batch "
            f"of {b}, one row per step, one column per actuator {names}) or ({b}, {nu}) (one "
            "constant per member); controls shared by every member: broadcast them "
            f"(jnp.broadcast_to(u, ({b},) + u.shape)) or pass a function u(t)"
        )
    if xp is np and not np.all(np.isfinite(u)):
        where = [int(x[0]) for x in np.nonzero(~np.isfinite(u))]
        step = f" at step {where[1]}" if u.ndim == 3 else ""
        raise ValueError(
            f"simulate_batch: controls are not finite for member {where[0]}{step}, "
            f"actuator '{names[where[-1]]}'"
        )
    # (B, nu): each member's constant held over every step; one program for both forms
    return xp.broadcast_to(u[:, None], (b, n, nu)) if u.ndim == 2 else u


def _raise_for_members(sol, what: str):
    """SolverError naming every failed member of a concrete batched Solution: its index, the
    first failed step, its time and the RESULTS message."""
    status = _to_host(sol.status)
    failed = np.nonzero((status != 0).any(axis=1))[0]
    if failed.size == 0:
        return
    lines, times = [], _to_host(sol.t)
    for b in failed[:10]:
        k = int(np.argmax(status[b] != 0))
        lines.append(
            f"member {int(b)}: step {k} (t = {float(times[b, k]):.6g} s): "
            f"{code_message(int(status[b, k]))}"
        )
    more = f"; and {failed.size - 10} more" if failed.size > 10 else ""
    raise SolverError(
        f"{what}: {failed.size} of {status.shape[0]} batch members failed: "
        + "; ".join(lines)
        + more
        + ". Run a member alone (jaxmbd.simulate / kinematics) for its constraints at fault."
    )


def _batch(analysis: str, models: Model, devices, throw: bool, chunk, gather, options: dict):
    if not isinstance(gather, bool):
        raise TypeError(f"{analysis}_batch: gather= must be True or False, got {gather!r}")
    if "check" in options:
        throw = resolve_throw(throw, options.pop("check"), f"{analysis}_batch")
    # invalid values are not refused here: like a failed solve, they mark their member
    # (status invalid_parameters) and spoil no other
    models = as_float64(models)
    controls = None
    if analysis == "simulate":
        if options.get("policy") is not None and options.get("controls") is not None:
            raise ValueError("simulate_batch: policy= excludes controls= (give one of them)")
        controls = _member_controls(models, options.pop("controls", None), options)
    sol = _sharded_map(analysis, (models, controls), devices, options, chunk, gather)
    if throw and not is_traced(models, controls, options):
        _raise_for_members(sol, f"{analysis}_batch")
    return sol


def simulate_batch(
    models: Model,
    *,
    devices=None,
    throw: bool = False,
    chunk: int | None = None,
    gather: bool = True,
    **options,
):
    """``simulate`` over a batched Model (vmap, compiled once per topology, options and batch
    shape; later calls with new parameter values reuse the program), sharded across
    ``devices`` (default: all). Options are those of :func:`jaxmbd.simulate`. Returns a
    Solution whose arrays have a leading batch axis. Failures are reported per member:
    ``sol.status`` (B, T), ``sol.result`` (one RESULTS value per member) and
    ``sol.failed_step`` (B,); one failed member never hides or spoils the others. With
    ``throw=True`` a failure of any member raises :class:`~jaxmbd.SolverError` after the run,
    naming each failed member, its step and time (default False: a batch returns its
    members' outcomes).

    ``chunk``: members vmapped together on a device; larger batches run as a sequence of
    such vmaps (``lax.map``), which keeps their Newton matrices in cache and lets each
    chunk iterate only as long as its own slowest member. Default on a CPU: for a small
    model (n = 6 nb + 2 nc up to ``jaxmbd.linear.small.SMALL_MAX``: the double pendulum,
    the slider crank, small robots) :data:`HOISTED_CHUNK` members, measured, for which
    each chunk's time loop compiles to one native loop; for a larger model the largest
    power of two whose Newton matrices fit in the device's share of :data:`CHUNK_BYTES`;
    on a GPU the whole batch in one vmap. Results do not depend on it.

    Across processes (``docs/guide/distributed.md``): after ``jax.distributed.initialize``,
    ``devices=jax.devices()`` (the default) or a ``jax.sharding.Mesh`` spanning every
    process shards the batch over all their devices; every process passes the same batch
    and runs the same compiled program. ``gather`` (default True): every process gets the
    whole result as replicated global arrays (``np.asarray`` reads the local copy; a
    gradient of a loss of it is the same in every process); False: arrays sharded over the
    batch axis, each process holding its own members (``sol.r.addressable_shards``, with
    their ``index``), no communication after the run. On one process it changes nothing.

    Controls and policies (:mod:`jaxmbd.actuators`, ``docs/guide/actuators.md``):

    * ``policy=pi``: one policy shared by every member, u = pi(t, observation) from each
      member's own state at each step's start. Its array leaves (an ``eqx.nn.MLP``'s weights)
      are dynamic arguments of the compiled program: new parameter values reuse it, and
      ``jax.grad``/``eqx.filter_grad`` of a loss of the batch (a mean over the members,
      say) reaches them, through ``chunk`` and ``devices`` alike (on several devices every
      device closes over the same parameters and the gradient sums the devices' shares).
      Its non-array fields (the activation function) are part of the program's key.
    * ``controls=``: per-member open-loop inputs carry a leading batch axis, always: (B, N,
      nu), row k of member b acting from t = k h to (k + 1) h, or (B, nu), a constant per
      member (held over every step; the same program as (B, N, nu)). A function u(t) is
      shared by every member. An array without the batch axis is refused, even where its
      shape could be read either way (B = N): broadcast it, ``jnp.broadcast_to(u, (B,) +
      u.shape)``, or pass a function.
    """
    return _batch("simulate", models, devices, throw, chunk, gather, _file_step(models, options))


def _file_step(models: Model, options: dict) -> dict:
    """``options`` with ``h``: as given, else the members' file ``timestep`` (models read from
    a file; one value for the batch), as :func:`~jaxmbd.simulate` defaults to it."""
    if options.get("h") is not None or models.constraint_model is None:
        return options
    timestep = models.constraint_model.options.timestep
    if is_traced(timestep):
        return options  # simulate names what is missing
    steps = np.unique(np.asarray(timestep))
    if steps.size != 1:
        raise ValueError(
            f"simulate_batch: the members' files have different timesteps {steps.tolist()}; pass h="
        )
    return {**options, "h": float(steps[0])}


def kinematics_batch(
    models: Model,
    *,
    devices=None,
    throw: bool = False,
    chunk: int | None = None,
    gather: bool = True,
    **options,
):
    """``kinematics`` over a batched Model; see :func:`simulate_batch`."""
    return _batch("kinematics", models, devices, throw, chunk, gather, options)
