"""Batching, action repeat, time-limit truncation, auto-reset and episode statistics, as one wrapper.

Termination (the task ended: no bootstrap) and truncation (the time limit: bootstrap from the true final
observation) are kept apart. Every function here is pure and jit-able; nothing runs in Python per step.
"""
from __future__ import annotations

import dataclasses
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp

from envs.raw import RawEnv
from jaxrl.types import EnvSpec


@flax.struct.dataclass
class EnvState:
    """State of a batch of N envs (leading axis N on every leaf)."""

    raw: Any  # the backend's own state
    obs: Any  # [N, obs_size] observation the agent acts on next ({part: [N, size]} if structured)
    episode_step: jax.Array  # [N] int32 agent decisions taken in the current episode
    episode_return: jax.Array  # [N] float32 return so far in the current episode
    key: jax.Array  # [N, 2] per-env key for the next reset


@flax.struct.dataclass
class Step:
    """What one batched step returns besides the new state."""

    obs: Any  # [N, obs] next observation to act on (after auto-reset where done); a dict if structured
    final_obs: Any  # [N, obs] the true s' of this transition (before any reset)
    reward: jax.Array  # [N] float32, summed over action repeats
    terminated: jax.Array  # [N] bool: the task ended (do not bootstrap)
    truncated: jax.Array  # [N] bool: the time limit ended it (bootstrap from final_obs)
    episode_return: jax.Array  # [N] return of the episode that ended here (valid where done)
    episode_length: jax.Array  # [N] its length in env steps (valid where done)

    @property
    def done(self):
        return self.terminated | self.truncated


def where_tree(mask: jax.Array, on_true, on_false):
    """Select per env (leading axis) between two pytrees with the same structure."""

    def select(a, b):
        return jnp.where(mask.reshape(mask.shape + (1,) * (a.ndim - mask.ndim)), a, b)

    return jax.tree.map(select, on_true, on_false)


def as_float32(obs):
    """Every part of an observation as float32."""
    return jax.tree.map(lambda x: x.astype(jnp.float32), obs)


@dataclasses.dataclass(frozen=True)
class VecEnv:
    """``num_envs`` copies of ``raw`` stepped together; ``action_repeat`` simulator steps per decision.

    The time limit is ``raw.episode_length`` env steps (simulator steps, counting repeats).

    ``raw.reset`` and ``raw.step`` are called through ``jax.jit(..., inline=True)`` inside the ``vmap``: JAX traces
    each once per single-env argument shapes and reuses that trace for every batch (the training batch, the
    evaluation batch, the auto-reset, the initial state, when they share this ``raw``): tracing an MJX step or reset
    in Python takes seconds. ``inline=True`` puts the traced operations into the caller's program as the plain
    call would, so the numbers are the same bit for bit (without it, Brax's rollouts moved in the last float bits).
    """

    raw: RawEnv
    num_envs: int
    action_repeat: int = 1

    @property
    def name(self) -> str:
        return self.raw.name

    @property
    def spec(self) -> EnvSpec:
        return EnvSpec(self.raw.obs_size, self.raw.action_size, self.decisions_per_episode, self.raw.can_terminate,
                       obs_parts=self.raw.obs_parts)

    @property
    def decisions_per_episode(self) -> int:
        return -(-self.raw.episode_length // self.action_repeat)

    def reset(self, key: jax.Array, num_envs: int | None = None) -> EnvState:
        n = self.num_envs if num_envs is None else num_envs
        keys = jax.random.split(key, 2 * n)
        raw, obs = jax.vmap(jax.jit(self.raw.reset, inline=True))(keys[:n])
        return EnvState(raw=raw, obs=as_float32(obs), episode_step=jnp.zeros((n,), jnp.int32),
                        episode_return=jnp.zeros((n,), jnp.float32), key=keys[n:])

    def repeated_step(self, raw_state, action):
        """One env's decision: ``action_repeat`` simulator steps of one unbatched state, without the time limit or
        auto-reset (``step`` adds those). Returns (state, obs, summed reward, terminated)."""
        step = jax.jit(self.raw.step, inline=True)
        if self.action_repeat == 1:
            return step(raw_state, action)

        def body(carry, _):
            state, obs, reward, terminated = carry
            new_state, new_obs, r, t = step(state, action)
            # Once the task has ended inside the repeat, freeze it: later sub-steps add nothing.
            state = where_tree(terminated, state, new_state)
            obs = where_tree(terminated, obs, new_obs)
            return (state, obs, reward + jnp.where(terminated, 0.0, r), terminated | t), None

        state, obs, reward, terminated = step(raw_state, action)
        (state, obs, reward, terminated), _ = jax.lax.scan(
            body, (state, obs, reward.astype(jnp.float32), terminated), None, length=self.action_repeat - 1)
        return state, obs, reward, terminated

    def step(self, state: EnvState, action: jax.Array) -> tuple[EnvState, Step]:
        raw, final_obs, reward, terminated = jax.vmap(self.repeated_step)(state.raw, action)
        final_obs = as_float32(final_obs)
        reward = reward.astype(jnp.float32)
        terminated = terminated.astype(jnp.bool_)
        episode_step = state.episode_step + 1
        truncated = (episode_step * self.action_repeat >= self.raw.episode_length) & ~terminated
        done = terminated | truncated
        episode_return = state.episode_return + reward

        def reset_done(args):
            raw, obs, key = args
            split = jax.vmap(jax.random.split)(key)
            new_raw, new_obs = jax.vmap(jax.jit(self.raw.reset, inline=True))(split[:, 1])
            return (where_tree(done, new_raw, raw), where_tree(done, as_float32(new_obs), obs),
                    jnp.where(done[:, None], split[:, 0], key))

        # Resetting is skipped (not masked) when no env finished: most steps of long episodes pay nothing.
        raw, obs, key = jax.lax.cond(jnp.any(done), reset_done, lambda args: args, (raw, final_obs, state.key))
        new_state = EnvState(raw=raw, obs=obs, episode_step=jnp.where(done, 0, episode_step),
                             episode_return=jnp.where(done, 0.0, episode_return), key=key)
        step = Step(obs=obs, final_obs=final_obs, reward=reward, terminated=terminated, truncated=truncated,
                    episode_return=episode_return, episode_length=episode_step * self.action_repeat)
        return new_state, step
