"""brax's own ``Env``/``Wrapper`` (``brax/envs/base.py``) and training wrappers
(``brax/envs/wrappers/training.py``: ``wrap`` with and without domain randomisation) run
on a jaxmbd environment. brax's physics pipelines are not imported (brax imports MJX,
which has no release for the MuJoCo that jaxmbd pins): their imports are stubbed, the
wrapper code runs as shipped.

    pip download brax==0.14.2 --no-deps -d /tmp/brax && cd /tmp/brax && unzip -q brax-*.whl
    pip install flax   # brax's base.py uses flax.struct
    python -m benchmarks.probes.brax_wrappers /tmp/brax/brax
"""

# ruff: noqa
import sys, types, importlib.util, pathlib

site = pathlib.Path(sys.argv[1])
brax = types.ModuleType("brax")
brax.__path__ = [str(site)]
sys.modules["brax"] = brax
bbase = types.ModuleType("brax.base")


class _Base:
    pass


bbase.System = object
bbase.Base = _Base
bbase.State = object
sys.modules["brax.base"] = bbase
brax.base = bbase
for name in [
    "brax.generalized",
    "brax.generalized.pipeline",
    "brax.io",
    "brax.io.image",
    "brax.mjx",
    "brax.mjx.pipeline",
    "brax.positional",
    "brax.positional.pipeline",
    "brax.spring",
    "brax.spring.pipeline",
]:
    sys.modules[name] = types.ModuleType(name)
envs = types.ModuleType("brax.envs")
envs.__path__ = [str(site / "envs")]
sys.modules["brax.envs"] = envs


def load(name, path):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


src = (site / "envs/base.py").read_text()
for line in [
    "from brax.generalized import pipeline as g_pipeline",
    "from brax.io import image",
    "from brax.mjx import pipeline as m_pipeline",
    "from brax.positional import pipeline as p_pipeline",
    "from brax.spring import pipeline as s_pipeline",
]:
    src = src.replace(line, "")
base = types.ModuleType("brax.envs.base")
sys.modules["brax.envs.base"] = base
exec(compile(src, str(site / "envs/base.py"), "exec"), base.__dict__)
wr = types.ModuleType("brax.envs.wrappers")
wr.__path__ = [str(site / "envs/wrappers")]
sys.modules["brax.envs.wrappers"] = wr
training = load("brax.envs.wrappers.training", site / "envs/wrappers/training.py")
import dataclasses, jax, jax.numpy as jnp, numpy as np
import jaxmbd as mbd

env = mbd.envs.make("cartpole", "balance")
w = training.wrap(env, episode_length=3)
s = jax.jit(w.reset)(jax.random.split(jax.random.PRNGKey(0), 4))
first = s.info["first_pipeline_state"].qpos
step = jax.jit(w.step)
for k in range(4):
    s = step(s, jnp.full((4, 1), 0.5))
    print(
        "step",
        k + 1,
        "done",
        np.asarray(s.done),
        "steps",
        np.asarray(s.info["steps"]),
        "sum_reward",
        np.round(np.asarray(s.info["episode_metrics"]["sum_reward"]), 3),
    )
    if k == 2:
        print("  auto-reset to the first state:", bool(jnp.all(s.pipeline_state.qpos == first)))


def rand(sys_):
    models = jax.vmap(lambda m: dataclasses.replace(sys_, mass=sys_.mass.at[1].set(m)))(
        jnp.linspace(0.05, 0.5, 4)
    )
    return models, mbd.envs.model_axes(models, sys_)


w = training.wrap(env, episode_length=3, randomization_fn=rand)
s = jax.jit(w.reset)(jax.random.split(jax.random.PRNGKey(0), 4))
s = jax.jit(w.step)(s, jnp.ones((4, 1)))
s = jax.jit(w.step)(s, jnp.ones((4, 1)))
print(
    "DomainRandomizationVmapWrapper: pole angles per mass", np.asarray(s.pipeline_state.qpos[:, 1])
)
