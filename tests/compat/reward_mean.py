"""Extra learned state through a State subclass and the field-copying idiom (README hook table, 2026-12-05)."""
import dataclasses

import flax.struct
import jax
import jax.numpy as jnp

from agents import sac


@flax.struct.dataclass
class RewardMeanState(sac.State):  # extra learned state: a running mean of the rewards trained on
    reward_mean: jax.Array


def reward_mean_init(key, spec, cfg):
    base = sac.init(key, spec, cfg)
    fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(base)}
    return RewardMeanState(**fields, reward_mean=jnp.zeros(()))


def reward_mean_update(state, batch, key, cfg):
    state, metrics = sac.update(state, batch, key, cfg)
    state = state.replace(reward_mean=0.99 * state.reward_mean + 0.01 * jnp.mean(batch.reward))
    return state, {**metrics, "reward_mean": state.reward_mean}


AGENT = sac.AGENT._replace(name="compat_reward_mean", init=reward_mean_init, update=reward_mean_update)
