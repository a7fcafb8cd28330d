"""Deterministic evaluation on a separate batch of envs, inside the compiled program."""
from __future__ import annotations

from typing import Callable

import jax
import jax.numpy as jnp


def evaluate(env, policy: Callable, key: jax.Array, num_envs: int) -> jax.Array:
    """Mean undiscounted return of one full episode per env; ``policy(obs) -> action`` is deterministic.

    Runs exactly one time limit of decisions; an env that terminates earlier stops accumulating.
    """

    def step(carry, _):
        env_state, total, running = carry
        env_state, out = env.step(env_state, policy(env_state.obs))
        total = total + jnp.where(running, out.reward, 0.0)
        return (env_state, total, running & ~out.done), None

    env_state = env.reset(key, num_envs)
    carry = (env_state, jnp.zeros((num_envs,)), jnp.ones((num_envs,), jnp.bool_))
    (_, total, _), _ = jax.lax.scan(step, carry, None, length=env.decisions_per_episode)
    return jnp.mean(total)
