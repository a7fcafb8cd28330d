"""Deterministic evaluation on a separate batch of envs, inside the compiled program."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp


def evaluate(env, policy: Callable, key: jax.Array, num_envs: int, carry: Any = ()) -> jax.Array:
    """Mean undiscounted return of one full episode per env.

    ``policy(obs, carry, key) -> (action, carry)`` acts without exploration noise (a planner may still draw
    random numbers, so it gets a fresh key every step); ``carry`` is the agent's per-env acting state at an
    episode start. Runs exactly one time limit of decisions; an env that terminates earlier stops accumulating.
    """

    def step(state, key):
        env_state, carry, total, running = state
        action, carry = policy(env_state.obs, carry, key)
        env_state, out = env.step(env_state, action)
        total = total + jnp.where(running, out.reward, 0.0)
        return (env_state, carry, total, running & ~out.done), None

    env_state = env.reset(key, num_envs)
    state = (env_state, carry, jnp.zeros((num_envs,)), jnp.ones((num_envs,), jnp.bool_))
    act_keys = jax.random.split(jax.random.fold_in(key, 1), env.decisions_per_episode)
    (_, _, total, _), _ = jax.lax.scan(step, state, act_keys)
    return jnp.mean(total)
