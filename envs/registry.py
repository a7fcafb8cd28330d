"""``make(name, num_envs, ...)``: Brax, MuJoCo Playground (DM Control Suite, locomotion, manipulation) and toy
environments by name.

Names are ``brax/<env>``, ``dmc/<Task>``, ``locomotion/<Task>``, ``manipulation/<Task>`` and ``toy/<Name>``;
``jaxrl envs`` lists them all. The locomotion and manipulation tasks need the robot models of ``jaxrl[robots]``
(``envs/menagerie.py``).
"""
from __future__ import annotations

import contextlib
import dataclasses
import importlib
import io
import warnings
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import jax.numpy as jnp

from envs import dmc
from envs.menagerie import use_packaged_menagerie
from envs.raw import RawEnv
from envs.rendering import select_gl_backend
from envs.toy import TOY_ENVS
from envs.wrappers import VecEnv
from jaxrl import ConfigError

PREFIXES = ("brax/", "dmc/", "locomotion/", "manipulation/", "toy/")
PLAYGROUND_SUITES = {"dmc": "dm_control_suite", "locomotion": "locomotion", "manipulation": "manipulation"}
BRAX_BACKENDS = ("generalized", "positional", "spring", "mjx")
PLAYGROUND_IMPLS = ("jax", "warp")
# Brax locomotion tasks that end an episode when the robot falls; the rest only hit the time limit.
BRAX_NON_TERMINATING = {"halfcheetah", "reacher", "pusher", "swimmer", "fast"}

# Loop settings (``jaxrl.loop.LoopConfig`` fields) a run on each suite starts from when no named config is given:
# LoopConfig < these < the agent's ``loop_defaults`` < named config < sweep tables < flags. Chosen by measurement
# with bench/defaults.py (3 seeds per agent and task; docs/benchmarks/defaults.md), not copied:
#   dmc:  action repeat 2 with 2 updates per agent decision (1 per simulator step, as before): SimbaV2's DMC
#         protocol; the SAC and TD-MPC2 papers' DMC baselines also repeat actions twice. At 20k env steps it lifted
#         SAC on all three DMC tasks of the table (CartpoleBalance 710 -> 997) and TD3 on CartpoleBalance (472 -> 547,
#         its other two level) at the same cost; action repeat 2 alone (half the updates) lost on CartpoleSwingup.
#   brax: none. Brax's and Playground's recipes normalise observations; here that sped SAC up on
#         inverted_pendulum but cost it half its return on inverted_double_pendulum, so it stays a flag.
#   toy:  none.
#   locomotion, manipulation: none yet (nothing measured; the massively parallel recipe is issue 14's named configs).
SUITE_LOOP_DEFAULTS: Mapping[str, Mapping[str, Any]] = MappingProxyType({
    "toy": MappingProxyType({}),
    "brax": MappingProxyType({}),
    "dmc": MappingProxyType({"action_repeat": 2, "updates_per_step": 2.0}),
    "locomotion": MappingProxyType({}),
    "manipulation": MappingProxyType({}),
})


def suite_loop_defaults(name: str) -> dict[str, Any]:
    """The loop defaults of env ``name``'s suite (``SUITE_LOOP_DEFAULTS``); {} for a name outside every suite (that
    name fails later, in ``make``, with the list of valid ones)."""
    suite = name.partition("/")[0] if isinstance(name, str) else ""
    return dict(SUITE_LOOP_DEFAULTS.get(suite, {}))


# Importing MuJoCo's MJX (Brax and Playground both do) imports NVIDIA Warp for MJX's Warp implementation: seconds of
# every process's start on a CPU (bench/playground_cost.py measures them), for an implementation that needs a CUDA
# GPU.
IMPORT_WARP_ENV = "JAXRL_IMPORT_WARP"


def import_mjx(playground_impl: str = "jax") -> None:
    """Import ``mujoco.mjx`` first, without Warp where nothing could use it: JAX on the CPU, the MJX (``jax``)
    implementation asked for, Warp not imported yet, and ``JAXRL_IMPORT_WARP`` not ``1``. Anywhere else (a GPU,
    ``--playground-impl warp``, an MJX the process imported before) MJX imports as it always does. Without Warp,
    MJX prints that it failed to import it; that line is swallowed."""
    import os
    import sys

    if "mujoco.mjx" in sys.modules or "warp" in sys.modules or playground_impl == "warp" \
            or os.environ.get(IMPORT_WARP_ENV) == "1":
        return
    import jax

    if jax.default_backend() != "cpu":
        return
    sys.modules["warp"] = None  # makes `import warp` raise ImportError, which MJX catches
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            importlib.import_module("mujoco.mjx")
    finally:
        del sys.modules["warp"]  # a later `import warp` of the user's own works as usual


def _brax_names() -> list[str]:
    import_mjx()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from brax import envs as brax_envs
    return sorted(brax_envs._envs)  # brax keeps no public listing


def _playground_suite(prefix: str):
    import_mjx()
    return getattr(importlib.import_module("mujoco_playground"), PLAYGROUND_SUITES[prefix])


def _playground_names(prefix: str) -> list[str]:
    names = list(_playground_suite(prefix).ALL_ENVS)
    if prefix == "dmc":  # Playground's own versions of the tasks made to follow dm_control (envs/dmc.py)
        names += [task + dmc.PLAYGROUND_SUFFIX for task in dmc.CHANGED]
    return names


def list_envs() -> list[str]:
    return ([f"brax/{n}" for n in _brax_names()]
            + [f"{prefix}/{n}" for prefix in PLAYGROUND_SUITES for n in _playground_names(prefix)]
            + [f"toy/{n}" for n in TOY_ENVS])


def env_note(name: str) -> str | None:
    """What ``jaxrl envs`` says beside ``name``: for a dmc/ task, how it differs from Playground's or dm_control's
    version (envs/dmc.py); None for the rest."""
    prefix, _, task = name.partition("/")
    return dmc.note(task) if prefix == "dmc" else None


def not_comparable(name: str) -> str | None:
    """Why returns on env ``name`` cannot be set beside numbers published on the benchmark's own simulator (for a
    dmc/ task: dm_control; envs/dmc.py, docs/dmc_audit.md); None where nothing known differs."""
    prefix, _, task = name.partition("/")
    return dmc.not_comparable(task) if prefix == "dmc" else None


def physics_caveat(name: str) -> str | None:
    """How the simulation of env ``name`` differs from the benchmark's while the task is the same (dmc/: Playground's
    solver settings against dm_control's); None where none is known."""
    prefix, _, task = name.partition("/")
    return dmc.physics_caveat(task) if prefix == "dmc" else None


def env_revision(name: str) -> int:
    """The revision of env ``name`` this code builds; it grows when an env keeps its name but changes what it
    simulates (dmc/BallInCup and the others of ``envs.dmc.CHANGED`` followed dm_control at revision 2)."""
    prefix, _, task = name.partition("/")
    return dmc.revision(task) if prefix == "dmc" else 1


def current_env_name(name: str, saved_revision: int) -> str:
    """Today's name of the env a run saved as ``name`` at ``saved_revision`` trained (``dmc/BallInCup`` saved at
    revision 1 is ``dmc/BallInCupPlayground``); ``name`` where it did not change."""
    prefix, _, task = name.partition("/")
    return f"dmc/{dmc.current_name(task, saved_revision)}" if prefix == "dmc" else name


def _unknown(name: str, valid: list[str]) -> ConfigError:
    shown = ", ".join(valid) if len(valid) <= 30 else ", ".join(valid[:30]) + ", ..."
    return ConfigError(f"unknown env {name!r}; valid: {shown} (run `jaxrl envs` to list all)")


def _from_state_api(name: str, env: Any, episode_length: int, can_terminate: bool, brax: bool = False) -> RawEnv:
    """Adapt an env whose reset/step return a State with .obs/.reward/.done (Brax and Playground alike)."""

    def render(states, width: int, height: int):
        # Brax's PipelineEnv draws pipeline states, Playground's envs their own States; both print a progress bar.
        with contextlib.redirect_stderr(io.StringIO()):
            return env.render([s.pipeline_state for s in states] if brax else states, height=height, width=width)

    def reset(key):
        state = env.reset(key)
        return state, state.obs

    def step(state, action):
        state = env.step(state, action)
        return state, state.obs, state.reward, state.done.astype(jnp.bool_)

    drawing = {"render": render, "control_dt": float(env.dt)}
    size = env.observation_size
    if not isinstance(size, Mapping):
        return RawEnv(name, int(size), int(env.action_size), episode_length, can_terminate, reset, step, **drawing)
    parts = []
    for part, shape in size.items():
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        if len(shape) != 1:
            raise ConfigError(f"{name}: observation part {part!r} has shape {shape}; only vector parts are supported")
        parts.append((part, int(shape[0])))
    return RawEnv(name, sum(n for _, n in parts), int(env.action_size), episode_length, can_terminate, reset, step,
                  obs_parts=tuple(parts), **drawing)


def make_raw(name: str, *, brax_backend: str = "generalized", playground_impl: str = "jax",
             episode_length: int | None = None, domain_randomization: bool = False,
             push_randomization: bool | None = None) -> RawEnv:
    """The unbatched env called ``name``; raises ConfigError (one line) for an unknown name or option.

    ``domain_randomization``: Playground's randomiser for the task (``registry.get_domain_randomizer``: friction,
    masses, joint and actuator parameters, ...), drawn per env at every reset. ``push_randomization``: Playground's
    random pushes where the task has them (``push_config`` on the humanoids, ``pert_config`` on Go1): True or False
    switches them, None keeps the task's own setting (on for T1, G1, H1-like humanoids; off for Go1)."""
    if not isinstance(name, str) or not name.startswith(PREFIXES):
        raise ConfigError(f"unknown env {name!r}; names start with one of {', '.join(PREFIXES)} "
                          "(run `jaxrl envs` to list all)")
    prefix, _, task = name.partition("/")
    select_gl_backend()  # before Brax or Playground imports MuJoCo, which reads MUJOCO_GL once
    if prefix != "toy":
        import_mjx(playground_impl)
    if (domain_randomization or push_randomization is not None) and prefix not in ("locomotion", "manipulation"):
        raise ConfigError(f"domain and push randomisation are Playground's, for locomotion/ and manipulation/ "
                          f"tasks; {name} has neither (leave domain_randomization off and push_randomization None)")
    if prefix == "toy":
        if task not in TOY_ENVS:
            raise _unknown(name, [f"toy/{n}" for n in TOY_ENVS])
        raw = TOY_ENVS[task]()
    elif prefix == "brax":
        if brax_backend not in BRAX_BACKENDS:
            raise ConfigError(f"unknown brax backend {brax_backend!r}; valid: {', '.join(BRAX_BACKENDS)}")
        names = _brax_names()
        if task not in names:
            raise _unknown(name, [f"brax/{n}" for n in names])
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from brax import envs as brax_envs

            env = brax_envs.get_environment(task, backend=brax_backend)
        raw = _from_state_api(name, env, 1000, task not in BRAX_NON_TERMINATING, brax=True)
    else:
        raw = _make_playground(name, prefix, task, playground_impl, domain_randomization, push_randomization)
    if episode_length is not None:
        if episode_length <= 0:
            raise ConfigError(f"episode_length must be a positive number of env steps, got {episode_length}")
        raw = dataclasses.replace(raw, episode_length=episode_length)
    return raw


def _make_playground(name: str, prefix: str, task: str, impl: str, domain_randomization: bool = False,
                     push_randomization: bool | None = None) -> RawEnv:
    if impl not in PLAYGROUND_IMPLS:
        raise ConfigError(f"unknown playground impl {impl!r}; valid: {', '.join(PLAYGROUND_IMPLS)}")
    names = _playground_names(prefix)
    if task not in names:
        raise _unknown(name, [f"{prefix}/{n}" for n in names])
    if prefix != "dmc":
        use_packaged_menagerie()
    # dmc/<Task> follows dm_control where Playground's port differs in what defines the task (envs/dmc.py,
    # docs/dmc_audit.md); dmc/<Task>Playground is Playground's task unchanged.
    playground_task = dmc.playground_original(task) if prefix == "dmc" else None
    suite = _playground_suite(prefix)
    cfg = suite.get_default_config(playground_task or task)
    physics = dmc.PHYSICS_OPTIONS.get(task) if prefix == "dmc" else None
    if physics is not None:
        cfg.sim_dt = physics["timestep"]
    if push_randomization is not None:
        _switch_pushes(name, cfg, push_randomization)
    # AeroCubeRotateZAxis's config has no impl key: it takes none.
    env = suite.load(playground_task or task, config=cfg, config_overrides={"impl": impl} if "impl" in cfg else {})
    if physics is not None:
        dmc.use_dm_control_physics(env, physics)
    if prefix == "dmc" and playground_task is None and task in dmc.CHANGED:
        env = dmc.DmControlTask(env, task)
    episode_length = int(cfg.episode_length) * int(cfg.get("action_repeat", 1))
    # Playground's DM Control tasks end only on a NaN state (a finished episode is a time limit); the robots
    # terminate when they fall or fail.
    raw = _from_state_api(name, env, episode_length, can_terminate=prefix != "dmc")
    if not domain_randomization:
        return raw
    with contextlib.redirect_stdout(io.StringIO()):  # it prints a line when a task has none
        randomizer = suite.get_domain_randomizer(task)
    if randomizer is None:
        raise ConfigError(f"{name} has no domain randomiser in Playground; leave domain_randomization off")
    return _with_domain_randomization(raw, env, randomizer)


def _switch_pushes(name: str, cfg, enable: bool) -> None:
    """Playground's pushes on or off in a task's config; off also zeroes the push magnitude, as FastTD3 does."""
    key = next((k for k in ("push_config", "pert_config") if k in cfg), None)
    if key is None:
        raise ConfigError(f"{name} has no random pushes in Playground (no push_config or pert_config); leave "
                          "push_randomization None")
    cfg[key].enable = enable
    if not enable and "magnitude_range" in cfg[key]:
        cfg[key].magnitude_range = [0.0, 0.0]


def _with_domain_randomization(raw: RawEnv, env: Any, randomizer) -> RawEnv:
    """``raw`` with Playground's domain randomiser applied per env: the raw state carries the model fields the
    randomiser changes (a few KB per env), drawn from each reset's key, and reset and step simulate with them.

    Playground's training wrapper draws them once per env for a whole run (a batched model closed over by the
    program); drawing at every reset keeps them part of the env state, so auto-reset, vmapped seeds, checkpoints
    and resume need nothing new, and every episode meets a new model."""
    import jax

    base = env.mjx_model
    leaves, treedef = jax.tree.flatten(base, is_leaf=lambda x: x is None)
    _, in_axes = randomizer(base, jax.random.split(jax.random.PRNGKey(0), 1))
    changed = [i for i, axis in enumerate(jax.tree.leaves(in_axes, is_leaf=lambda x: x is None)) if axis == 0]

    def draw(key):
        randomized, _ = randomizer(base, key[None])
        drawn = jax.tree.leaves(randomized, is_leaf=lambda x: x is None)
        return tuple(drawn[i][0] for i in changed)

    @contextlib.contextmanager
    def simulating(fields):
        model = list(leaves)
        for i, value in zip(changed, fields, strict=True):
            model[i] = value
        original = env.unwrapped._mjx_model
        env.unwrapped._mjx_model = treedef.unflatten(model)  # read while tracing, as Playground's wrapper does
        try:
            yield
        finally:
            env.unwrapped._mjx_model = original

    def reset(key):
        model_key, key = jax.random.split(key)
        fields = draw(model_key)
        with simulating(fields):
            state, obs = raw.reset(key)
        return (fields, state), obs

    def step(state, action):
        fields, inner = state
        with simulating(fields):
            inner, obs, reward, terminated = raw.step(inner, action)
        return (fields, inner), obs, reward, terminated

    def render(states, width, height):
        return raw.render([inner for _, inner in states], width, height)

    return dataclasses.replace(raw, reset=reset, step=step, render=render)


def make(name: str, num_envs: int, *, action_repeat: int = 1, episode_length: int | None = None,
         brax_backend: str = "generalized", playground_impl: str = "jax", domain_randomization: bool = False,
         push_randomization: bool | None = None):
    """A batch of ``num_envs`` auto-resetting envs with time-limit truncation and episode statistics.

    ``episode_length`` (env steps, counting action repeats) overrides the task's own time limit.
    """
    if num_envs <= 0:
        raise ConfigError(f"num_envs must be a positive integer, got {num_envs}")
    if action_repeat <= 0:
        raise ConfigError(f"action_repeat must be a positive integer, got {action_repeat}")
    raw = make_raw(name, brax_backend=brax_backend, playground_impl=playground_impl, episode_length=episode_length,
                   domain_randomization=domain_randomization, push_randomization=push_randomization)
    if action_repeat > raw.episode_length:
        raise ConfigError(f"action_repeat={action_repeat} is longer than {name}'s episodes ({raw.episode_length} env "
                          "steps): every episode would end inside one agent decision; use an action_repeat <= the "
                          "episode length")
    return VecEnv(raw, num_envs, action_repeat)
