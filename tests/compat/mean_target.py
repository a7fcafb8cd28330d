"""A swapped TD target reading the target critics directly (README hook table, 2026-12-05)."""
import jax
import jax.numpy as jnp

from agents import sac
from jaxrl.losses import td_target
from jaxrl.networks import sample_tanh_gaussian


def mean_target(state, batch, key, cfg):  # the target critics' mean instead of their minimum
    next_mean, next_log_std = state.actor.apply(state.actor_params, batch.next_obs)
    next_action, next_log_prob = sample_tanh_gaussian(key, next_mean, next_log_std)
    next_q = state.critic.apply(state.target_critic_params, batch.next_obs, next_action)[..., 0]
    next_value = jnp.mean(next_q, axis=0) - jnp.exp(state.log_alpha) * next_log_prob
    return jax.lax.stop_gradient(td_target(batch, next_value))


AGENT = sac.AGENT._replace(name="compat_mean_target", update=sac.make_update(target_fn=mean_target))
