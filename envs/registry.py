"""``make(name, num_envs, ...)``: Brax, MuJoCo Playground DM Control Suite and toy environments by name.

Names are ``brax/<env>``, ``dmc/<Task>`` and ``toy/<Name>``; ``jaxrl envs`` lists them all.
"""
from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import jax.numpy as jnp

from envs.raw import RawEnv
from envs.toy import TOY_ENVS
from envs.wrappers import VecEnv
from jaxrl import ConfigError

PREFIXES = ("brax/", "dmc/", "toy/")
BRAX_BACKENDS = ("generalized", "positional", "spring", "mjx")
PLAYGROUND_IMPLS = ("jax", "warp")
# Brax locomotion tasks that end an episode when the robot falls; the rest only hit the time limit.
BRAX_NON_TERMINATING = {"halfcheetah", "reacher", "pusher", "swimmer", "fast"}

# Loop settings (``jaxrl.loop.LoopConfig`` fields) a run on each suite starts from when no named config is given:
# LoopConfig < these < the agent's ``loop_defaults`` < named config < sweep tables < flags. Chosen by measurement
# with bench/defaults.py (3 seeds per agent and task; README, "Learning quality of the defaults"), not copied:
#   dmc:  action repeat 2 with 2 updates per agent decision (1 per simulator step, as before): SimbaV2's DMC
#         protocol; the SAC and TD-MPC2 papers' DMC baselines also repeat actions twice. At 20k env steps it lifted
#         SAC and TD3 on all three DMC tasks of the table (CartpoleBalance 710 -> 997 for SAC) at the same cost;
#         action repeat 2 alone (half the updates) lost on CartpoleSwingup.
#   brax: none. Brax's and Playground's recipes normalise observations; here that sped SAC up on
#         inverted_pendulum but cost it two thirds of its return on inverted_double_pendulum, so it stays a flag.
#   toy:  none.
SUITE_LOOP_DEFAULTS: Mapping[str, Mapping[str, Any]] = MappingProxyType({
    "toy": MappingProxyType({}),
    "brax": MappingProxyType({}),
    "dmc": MappingProxyType({"action_repeat": 2, "updates_per_step": 2.0}),
})


def suite_loop_defaults(name: str) -> dict[str, Any]:
    """The loop defaults of env ``name``'s suite (``SUITE_LOOP_DEFAULTS``); {} for a name outside every suite (that
    name fails later, in ``make``, with the list of valid ones)."""
    suite = name.partition("/")[0] if isinstance(name, str) else ""
    return dict(SUITE_LOOP_DEFAULTS.get(suite, {}))


def _brax_names() -> list[str]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from brax import envs as brax_envs
    return sorted(brax_envs._envs)  # brax keeps no public listing


def _dmc_names() -> list[str]:
    from mujoco_playground import dm_control_suite

    return list(dm_control_suite.ALL_ENVS)


def list_envs() -> list[str]:
    return ([f"brax/{n}" for n in _brax_names()] + [f"dmc/{n}" for n in _dmc_names()]
            + [f"toy/{n}" for n in TOY_ENVS])


def _unknown(name: str, valid: list[str]) -> ConfigError:
    shown = ", ".join(valid) if len(valid) <= 30 else ", ".join(valid[:30]) + ", ..."
    return ConfigError(f"unknown env {name!r}; valid: {shown} (run `jaxrl envs` to list all)")


def _from_state_api(name: str, env: Any, episode_length: int, can_terminate: bool) -> RawEnv:
    """Adapt an env whose reset/step return a State with .obs/.reward/.done (Brax and Playground alike)."""

    def reset(key):
        state = env.reset(key)
        return state, state.obs

    def step(state, action):
        state = env.step(state, action)
        return state, state.obs, state.reward, state.done.astype(jnp.bool_)

    return RawEnv(name, int(env.observation_size), int(env.action_size), episode_length, can_terminate,
                  reset, step)


def make_raw(name: str, *, brax_backend: str = "generalized", playground_impl: str = "jax",
             episode_length: int | None = None) -> RawEnv:
    """The unbatched env called ``name``; raises ConfigError (one line) for an unknown name or option."""
    if not isinstance(name, str) or not name.startswith(PREFIXES):
        raise ConfigError(f"unknown env {name!r}; names start with one of {', '.join(PREFIXES)} "
                          "(run `jaxrl envs` to list all)")
    prefix, _, task = name.partition("/")
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
        raw = _from_state_api(name, env, 1000, task not in BRAX_NON_TERMINATING)
    else:
        if playground_impl not in PLAYGROUND_IMPLS:
            raise ConfigError(f"unknown playground impl {playground_impl!r}; valid: {', '.join(PLAYGROUND_IMPLS)}")
        names = _dmc_names()
        if task not in names:
            raise _unknown(name, [f"dmc/{n}" for n in names])
        from mujoco_playground import dm_control_suite

        cfg = dm_control_suite.get_default_config(task)
        env = dm_control_suite.load(task, config_overrides={"impl": playground_impl})
        # Playground's DM Control tasks end only on a NaN state; a finished episode is a time limit.
        raw = _from_state_api(name, env, int(cfg.episode_length) * int(cfg.action_repeat), False)
    if episode_length is not None:
        if episode_length <= 0:
            raise ConfigError(f"episode_length must be a positive number of env steps, got {episode_length}")
        raw = dataclasses.replace(raw, episode_length=episode_length)
    return raw


def make(name: str, num_envs: int, *, action_repeat: int = 1, episode_length: int | None = None,
         brax_backend: str = "generalized", playground_impl: str = "jax"):
    """A batch of ``num_envs`` auto-resetting envs with time-limit truncation and episode statistics.

    ``episode_length`` (env steps, counting action repeats) overrides the task's own time limit.
    """
    if num_envs <= 0:
        raise ConfigError(f"num_envs must be a positive integer, got {num_envs}")
    if action_repeat <= 0:
        raise ConfigError(f"action_repeat must be a positive integer, got {action_repeat}")
    raw = make_raw(name, brax_backend=brax_backend, playground_impl=playground_impl, episode_length=episode_length)
    return VecEnv(raw, num_envs, action_repeat)
