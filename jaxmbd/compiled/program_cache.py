"""jaxmbd's top-level programs kept on disk as exported StableHLO (``jax.export``), so that a
new process runs a model it ran before without tracing it again.

JAX's persistent compilation cache keeps XLA's compiled programs, but its key is the
lowered program: every new process traces and lowers each program again before it can look
the compiled one up, and tracing is most of a warm start (seconds for a small model). Here a
program is looked up before tracing, by a key of everything that makes it: the function
(its code and the values it closes over and reads: a lambda over a new ``t_end`` is another
program), the static part of its arguments (the model's structure, the options: pickled, with the
code of every function and class met on the way), the shapes and dtypes of its array
arguments, JAX's tracing configuration, the versions of jax and jaxlib and the source of
jaxmbd itself. A hit is deserialised and compiled (XLA's cache then has it); a miss is
exported, run and saved. Beside it the compiled executable is kept, keyed by that key and
by what XLA compiles with (compiler options, ``XLA_FLAGS``, JAX's settings, the backend,
its devices, the host CPU): a hit loads it without tracing, lowering or XLA's cache lookup
(with its compile options and the FFI handlers that lowering would set up, as
``jax.export``'s reload does); one that does not load, or fails on its first call, is
replaced by the exported program's. Anything that cannot be keyed or exported (a closure over an
object that does not pickle, a host callback in the program) or a file that does not load
runs the ordinary ``jit`` path. ``JAXMBD_NO_COMPILATION_CACHE=1`` turns this cache off with
XLA's (:mod:`jaxmbd._config`).
"""

from __future__ import annotations

import contextlib
import functools
import hashlib
import io
import marshal
import os
import pickle
import threading
import types
import warnings
import weakref
import zlib
from pathlib import Path

import equinox as eqx
import jax
import jaxlib
import numpy as np
from jax._src import config as jax_config

try:  # not public API: without it, no executable is stored or loaded (exported programs are)
    from jax._src import compilation_cache as jax_compilation_cache
    from jax._src import compiler as jax_compiler
    from jax._src.export._export import _ensure_backends_initialized
    from jax.experimental.serialize_executable import _JaxPjrtUnpickler, serialize
except ImportError:  # pragma: no cover
    _JaxPjrtUnpickler = object
    jax_compiler = jax_compilation_cache = _ensure_backends_initialized = serialize = None

from .. import _config

#: Bumped when the file layout changes.
FORMAT = 3


class _Leaf:
    """Where an array leaf of a program's output goes (the output's skeleton)."""

    def __reduce__(self):
        return (_Leaf, ())


class _Unkeyable(Exception):
    pass


def _code_bytes(code: types.CodeType) -> bytes:
    return marshal.dumps(code)


def _names(code: types.CodeType) -> set[str]:
    names = set(code.co_names)
    for const in code.co_consts:
        if isinstance(const, types.CodeType):
            names |= _names(const)
    return names


def _globals_used(fun: types.FunctionType) -> tuple:
    """The global values a function's code reads (modules by name): a changed constant
    changes the key."""
    used = []
    for name in sorted(_names(fun.__code__)):
        if name in fun.__globals__:
            value = fun.__globals__[name]
            if isinstance(value, types.ModuleType):
                value = ("module", value.__name__)
            used.append((name, value))
    return tuple(used)


def _class_code(cls) -> bytes:
    """The code of a class defined outside jaxmbd: its functions' bytecode in MRO order, so
    that an edited method changes the key."""
    parts = []
    for klass in cls.__mro__:
        if klass.__module__.split(".")[0] in ("builtins", "jaxmbd", "equinox", "jax", "abc"):
            continue
        for name, value in sorted(vars(klass).items()):
            fun = getattr(value, "__func__", value)
            if isinstance(fun, types.FunctionType):
                parts.append(name.encode() + _code_bytes(fun.__code__))
                parts.append(_static_bytes(_globals_used(fun)))
            elif not name.startswith("__"):
                parts.append(name.encode() + repr(value).encode())
    return b"".join(parts)


class _KeyPickler(pickle.Pickler):
    """Pickles the static part of a program's arguments for its key; a function or class
    from outside jaxmbd also contributes its code, and a code object its bytecode."""

    def reducer_override(self, obj):
        if isinstance(obj, types.CodeType):
            return (bytes, (_code_bytes(obj),))
        if isinstance(obj, types.FunctionType):
            local = "<locals>" in obj.__qualname__ or obj.__name__ == "<lambda>"
            if not local and obj.__module__ and obj.__module__.split(".")[0] == "jaxmbd":
                # by name (jaxmbd's source hash covers its code); not by pickle's reference,
                # which refuses a function its module holds decorated (``_run`` under ``@jit``)
                return (tuple, ((obj.__module__, obj.__qualname__),))
            # what the function computes: its code and every value it reads (a lambda's
            # closure too: the same code over a new t_end is another program)
            try:
                cells = tuple(c.cell_contents for c in obj.__closure__ or ())
            except ValueError:  # a cell not yet assigned
                raise _Unkeyable(obj) from None
            return (tuple, ((obj.__module__, obj.__qualname__, obj.__code__, cells,
                             obj.__defaults__, obj.__kwdefaults__,
                             _globals_used(obj)),))  # fmt: skip
        # builtins by reference: ``tuple`` is the constructor of the reductions above
        if isinstance(obj, type) and obj.__module__.split(".")[0] not in ("jaxmbd", "builtins"):
            if "<locals>" in obj.__qualname__:
                raise _Unkeyable(obj)
            return (tuple, ((obj.__module__, obj.__qualname__, _class_code(obj)),))
        return NotImplemented


def _static_bytes(tree) -> bytes:
    buffer = io.BytesIO()
    try:
        _KeyPickler(buffer, protocol=5).dump(tree)
    except _Unkeyable:
        raise
    except Exception as err:  # an object that does not pickle: no key
        raise _Unkeyable(err) from None
    return buffer.getvalue()


@functools.cache
def _source_hash() -> str:
    """The hash of jaxmbd's own source (an edited checkout changes every key)."""
    digest = hashlib.sha256()
    root = Path(__file__).resolve().parents[1]  # the jaxmbd package
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _environment() -> bytes:
    context = [repr(x) for x in jax_config.trace_context() if " at 0x" not in repr(x)]
    return repr(
        (FORMAT, jax.__version__, jaxlib.__version__, _source_hash(), jax.default_backend(),
         [d.device_kind for d in jax.local_devices()][:1], context)
    ).encode()  # fmt: skip


def folder() -> Path | None:
    """The folder of the exported programs, next to XLA's cache; None when off."""
    if _config._opted_out() or not jax.config.jax_enable_compilation_cache:
        return None
    xla = jax.config.jax_compilation_cache_dir
    if xla is None:
        return None
    return Path(xla).parent / "programs"


def _key(fun, name: str, static, avals) -> str:
    digest = hashlib.sha256(_environment())
    digest.update(name.encode())
    digest.update(_static_bytes((fun, static)))
    digest.update(repr(avals).encode())
    return digest.hexdigest()


def _specs(leaves):
    """The abstract values of array leaves (numpy arrays too: never weakly typed)."""
    return [jax.ShapeDtypeStruct(x.shape, x.dtype, weak_type=bool(getattr(x, "weak_type", False)))
            for x in leaves]  # fmt: skip


def _avals(leaves) -> tuple:
    """(shape, dtype, weak type) of each array leaf."""
    return tuple((x.shape, str(x.dtype), bool(getattr(x, "weak_type", False))) for x in leaves)


def _split(args, kwargs):
    tree = (args, kwargs)
    dynamic, static = eqx.partition(tree, eqx.is_array)
    leaves = jax.tree_util.tree_leaves(dynamic)
    return dynamic, static, leaves, _avals(leaves)


class _Program:
    """A program ready to call on flat leaves: its compiled call and its output's skeleton.
    ``fallback``: for a stored executable, the file and a function that builds the program
    from the exported one instead, used when the executable fails on its first call (it
    loaded but cannot run here): the file is removed and the call made again."""

    def __init__(self, call, skeleton, fallback=None):
        self.call = call
        self.skeleton = skeleton
        self.fallback = fallback

    def __call__(self, leaves):
        if self.fallback is None:
            out = self.call(*leaves)
        else:
            try:
                out = self.call(*leaves)
                jax.block_until_ready(out)
            except jax.errors.JaxRuntimeError:
                path, rebuild = self.fallback
                path.unlink(missing_ok=True)
                program = rebuild()
                if program is False:
                    raise
                self.call, self.skeleton = program.call, program.skeleton
                out = self.call(*leaves)
            self.fallback = None
        out = iter(out)
        return jax.tree_util.tree_map(
            lambda x: next(out) if isinstance(x, _Leaf) else x,
            self.skeleton,
            is_leaf=lambda x: isinstance(x, _Leaf),
        )


def _export(fun, dynamic, static, leaves, compiler_options):
    skeletons = []

    def flat(*xs):
        it = iter(xs)
        args, kwargs = eqx.combine(jax.tree_util.tree_map(lambda _: next(it), dynamic), static)
        out = fun(*args, **kwargs)
        out_dynamic, out_static = eqx.partition(out, eqx.is_array)
        out_leaves, treedef = jax.tree_util.tree_flatten(out_dynamic)
        skeletons.append(
            eqx.combine(
                jax.tree_util.tree_unflatten(treedef, [_Leaf()] * len(out_leaves)), out_static
            )  # fmt: skip
        )
        return out_leaves

    specs = _specs(leaves)
    exported = jax.export.export(jax.jit(flat))(*specs)
    return exported, skeletons[-1]


def _write(path: Path, data: bytes):
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(f".{os.getpid()}.tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)  # atomic: a reader sees a whole file or none


def remembered(name: str, context, compute) -> bool:
    """``compute()`` (a yes or no that costs a compile, such as whether XLA knows an
    option), kept in the cache folder for later processes under ``name`` and a key of
    ``context``, the versions of jax and jaxlib, the backend and ``XLA_FLAGS``; computed
    where the cache is off or the file cannot be read or written."""
    where = folder()
    if where is None:
        return compute()
    client = jax.local_devices()[0].client
    key = repr((FORMAT, name, context, jax.__version__, jaxlib.__version__, client.platform,
                client.platform_version, os.environ.get("XLA_FLAGS", "")))  # fmt: skip
    path = where / f"{name}-{hashlib.sha256(key.encode()).hexdigest()[:40]}.answer"
    try:
        return {b"1": True, b"0": False}[path.read_bytes()]
    except (OSError, KeyError):
        pass
    answer = bool(compute())
    try:
        _write(path, b"1" if answer else b"0")
    except OSError:
        pass
    return answer


#: What :func:`cached`'s function returns when the cache cannot serve a call.
NOT_STORED = object()


class _Loaded(dict):
    """One cached function's programs loaded in this process, by call signature (a dict
    that a weak reference can point to)."""


#: every cached function's loaded programs, for :func:`forget_loaded` (by ``id``: dicts
#: compare by content, and two empty ones would be one entry of a set)
_LOADED: weakref.WeakValueDictionary[int, _Loaded] = weakref.WeakValueDictionary()


def forget_loaded() -> None:
    """Drop the programs this process has loaded or compiled through the cache, as
    ``jax.clear_caches()`` drops JAX's: their next call loads them again from disk. XLA:CPU
    maps each compiled program into hundreds of memory regions, held while the program is;
    a process that runs many models frees them this way (``jax.clear_caches()`` alone does
    not reach these)."""
    for programs in list(_LOADED.values()):
        programs.clear()


def cached(fun, name: str):
    """``fun`` (a function of pytrees, as ``eqx.filter_jit`` takes) through the disk cache
    of exported programs; returns a function of (args, kwargs, compiler_options, *, flat)
    that returns :data:`NOT_STORED` when the cache cannot serve the call (the caller then
    runs its ordinary path)."""
    programs = _Loaded()
    _LOADED[id(programs)] = programs

    def call(args, kwargs, compiler_options, *, flat=None):
        where = folder()
        if where is None:
            return NOT_STORED
        # the key of this process's programs from one flattening (a loaded program's call
        # is a fraction of a millisecond: the key must cost less): the tree's structure,
        # which leaves are arrays, the other leaves and the arrays' shapes and dtypes;
        # ``flat``: the caller's tree_flatten((args, kwargs)), where it has made it
        flat, treedef = jax.tree_util.tree_flatten((args, kwargs)) if flat is None else flat
        arrays = tuple(eqx.is_array(x) for x in flat)
        leaves = [x for x, is_array in zip(flat, arrays, strict=True) if is_array]
        avals = tuple((x.shape, x.dtype, getattr(x, "weak_type", False)) for x in leaves)
        try:
            memo = (treedef, arrays, tuple(x for x, a in zip(flat, arrays, strict=True)
                                           if not a), avals)  # fmt: skip
            hash(memo)
        except TypeError:
            return NOT_STORED
        memo = memo + (str(where), repr(compiler_options))
        program = programs.get(memo)
        if program is None:
            dynamic, static, leaves, avals = _split(args, kwargs)
            program = programs[memo] = _load_or_export(
                fun, name, where, dynamic, static, leaves, avals, compiler_options
            )
        return NOT_STORED if program is False else program(leaves)

    return call


@functools.cache
def _host_cpu() -> str | None:
    """The host's CPU model and instruction-set flags (Linux's /proc/cpuinfo), or None
    where they cannot be read: XLA compiles CPU code for the host's instruction set, so an
    executable stored by another CPU (a home folder shared between machines) must not load."""
    try:
        lines = Path("/proc/cpuinfo").read_text().splitlines()
    except OSError:
        return None
    fields = ("model name", "flags", "features", "cpu implementer", "cpu part", "vendor_id")
    found = sorted({line for line in lines if line.lower().startswith(fields)})
    return "\n".join(found) if found else None


def _executable_key(key: str, compiler_options) -> str | None:
    """The key of a compiled executable: the exported program's ``key`` and everything that
    XLA compiles it with (the options, ``XLA_FLAGS``, JAX's settings, the backend, its
    devices, the host's CPU); None where the CPU cannot be identified (no executable is
    stored or loaded there)."""
    cpu = _host_cpu()
    if cpu is None or serialize is None:
        return None
    client = jax.local_devices()[0].client
    settings = sorted((k, repr(v)) for k, v in jax.config.values.items())
    settings = [(k, v) for k, v in settings if " at 0x" not in v]
    context = (key, sorted((compiler_options or {}).items()), os.environ.get("XLA_FLAGS", ""),
               settings, client.platform, client.platform_version,
               [(d.platform, d.device_kind, d.id) for d in jax.local_devices()], cpu)  # fmt: skip
    return hashlib.sha256(repr(context).encode()).hexdigest()


def _xla_options(compiler_options, device):
    """The compile options of a one-device program: a stored CPU executable must load with
    the debug options it was compiled with (the kernels it calls are named by them)."""
    return jax_compiler.get_compile_options(
        num_replicas=1, num_partitions=1, device_assignment=np.array([[device]]),
        env_options_overrides=dict(compiler_options or {}), backend=device.client,
    )  # fmt: skip


class _ExecutableUnpickler(_JaxPjrtUnpickler):
    """``jax.experimental.serialize_executable``'s unpickler, loading the executable with
    its compile options (that module's loader passes none)."""

    def __init__(self, file, device, options, original: bytes | None = None):
        super().__init__(file, device.client, [device])
        self.options = options
        self.original = original

    def persistent_load(self, pid):
        if pid[0] == "exec":
            executable = pid[1] if self.original is None else self.original
            return self.backend.deserialize_executable(executable, self.execution_devices,
                                                       self.options)  # fmt: skip
        return super().persistent_load(pid)


def _load_executable(path: Path | None, compiler_options, rebuild) -> _Program | None:
    """The compiled program stored at ``path`` (no tracing, lowering or compiling), or None
    where there is none or it does not load; ``rebuild``: the program without it
    (:class:`_Program`'s fallback)."""
    if path is None or not path.exists():
        return None
    try:
        payload, in_tree, out_tree, skeleton, original = pickle.loads(
            zlib.decompress(path.read_bytes()))  # fmt: skip
        device = jax.devices()[0]
        # the FFI handlers that lowering would set up (LAPACK's function pointers on the
        # CPU): jax.export's reloaded programs call the same before they run
        _ensure_backends_initialized((device.platform,))
        options = _xla_options(compiler_options, device)
        unpickler = _ExecutableUnpickler(io.BytesIO(payload), device, options, original)
        unloaded, args_info_flat, no_kwargs = unpickler.load()
        compiled = jax.stages.Compiled(unloaded.load(), [], in_tree.unflatten(args_info_flat),
                                       out_tree, no_kwargs=no_kwargs)  # fmt: skip
        leaves = jax.tree_util.tree_leaves(skeleton, is_leaf=lambda x: isinstance(x, _Leaf))
        if sum(isinstance(x, _Leaf) for x in leaves) != out_tree.num_leaves:
            return None
        return _Program(compiled, skeleton, fallback=(path, rebuild))
    except Exception:  # a corrupt or foreign file: compile instead, and replace it
        return None


@contextlib.contextmanager
def _xla_cache_reads():
    """Yields ``{"hits": n, "executables": [...]}``: the hits of XLA's persistent cache
    in the block and the serialized executables it read for this thread, as the cache holds
    them. An executable that the cache returns was deserialized, and serializing it again
    drops its object code (jaxlib 0.10 on the CPU: 42 kB -> 30 kB for a small program,
    and the stored file then fails on its first call with "Function ... not found"), so
    the executable stored for a later process must be the cache's own bytes."""
    reads = {"hits": 0, "executables": []}
    thread = threading.get_ident()
    extract = getattr(jax_compilation_cache, "extract_executable_and_time", None)

    def hit(event, **_):
        if event == "/jax/compilation_cache/cache_hits":
            reads["hits"] += 1

    def extracting(data):
        found = extract(data)
        if threading.get_ident() == thread:
            reads["executables"].append(found[0])
        return found

    jax.monitoring.register_event_listener(hit)
    if extract is not None:
        jax_compilation_cache.extract_executable_and_time = extracting
    try:
        yield reads
    finally:
        jax.monitoring.unregister_event_listener(hit)
        if extract is not None:
            jax_compilation_cache.extract_executable_and_time = extract


def _compile_and_store(call, leaves, skeleton, path: Path | None):
    """``call`` (a jitted exported program) compiled for ``leaves``, and stored at ``path``
    for later processes; the plain ``call`` where there is no ``path`` or the executable
    cannot be serialised."""
    if path is None:
        return call
    try:
        with _xla_cache_reads() as reads:
            compiled = call.lower(*_specs(leaves)).compile()
        original = None
        if reads["hits"]:  # XLA's persistent cache had it: store the bytes it holds
            if len(reads["executables"]) != 1:
                return compiled  # not seen: nothing stored (XLA's cache serves)
            original = reads["executables"][0]
        payload, in_tree, out_tree = serialize(compiled)
        # compressed: a CPU executable's object code is 1-2 MB and compresses about 4x
        data = zlib.compress(
            pickle.dumps((payload, in_tree, out_tree, skeleton, original), protocol=5), 1
        )
    except Exception:  # a backend without serialisable executables: XLA's cache serves
        return call
    try:
        _write(path, data)
    except OSError as err:
        warnings.warn(f"jaxmbd: cannot write {path}: {err}", RuntimeWarning, stacklevel=6)
    return compiled


def _load_or_export(fun, name, where, dynamic, static, leaves, avals, compiler_options):
    try:
        key = _key(fun, name, static, avals)
    except _Unkeyable:
        return False
    path = where / f"{name}-{key[:40]}.jaxexport"
    binary_key = _executable_key(key, compiler_options)
    binary = None if binary_key is None else path.with_suffix(f".{binary_key[:24]}.xlaexe")

    def from_exported(store: Path | None):
        exported = None
        if path.exists():
            try:
                exported_bytes, skeleton = pickle.loads(path.read_bytes())
                exported = jax.export.deserialize(exported_bytes)
            except Exception:  # a corrupt or foreign file: trace instead, and replace it
                exported = None
        if exported is None:
            try:
                exported, skeleton = _export(fun, dynamic, static, leaves, compiler_options)
                serialized = exported.serialize()
                data = pickle.dumps((serialized, skeleton), protocol=5)
                # run what a later process will load (its outputs' types: the keys of later
                # calls)
                exported = jax.export.deserialize(serialized)
            except Exception:  # a program JAX cannot export (a host callback): plain jit
                return False
            try:
                _write(path, data)
            except OSError as err:
                warnings.warn(f"jaxmbd: cannot write {path}: {err}", RuntimeWarning,
                              stacklevel=5)  # fmt: skip
        call = jax.jit(exported.call, compiler_options=compiler_options)
        return _Program(_compile_and_store(call, leaves, skeleton, store), skeleton)

    program = _load_executable(binary, compiler_options, lambda: from_exported(None))
    return from_exported(binary) if program is None else program


__all__ = ["NOT_STORED", "cached", "folder", "forget_loaded", "remembered"]
