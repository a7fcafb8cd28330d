"""A Config subclass, an actor loss over every critic and a loop default (the README's REDQ idioms, 2026-12-05)."""
from types import MappingProxyType

import flax.struct
import jax
import jax.numpy as jnp

from agents import sac
from jaxrl.networks import sample_tanh_gaussian

static = lambda default: flax.struct.field(pytree_node=False, default=default)  # noqa: E731


@flax.struct.dataclass
class Config(sac.Config):
    num_critics: int = static(4)
    policy_delay: int = static(2)


def mean_q_actor_loss(actor_params, state, batch, key, cfg):
    """E[alpha log pi(a|s) - mean_j Q_j(s, a)] over all critics, a reparameterised."""
    mean, log_std = state.actor.apply(actor_params, batch.obs)
    action, log_prob = sample_tanh_gaussian(key, mean, log_std)
    q = state.critic.apply(state.critic_params, batch.obs, action)[..., 0]
    loss = jnp.mean(jnp.exp(jax.lax.stop_gradient(state.log_alpha)) * log_prob - jnp.mean(q, axis=0))
    return loss, {"actor_loss": loss, "entropy": -jnp.mean(log_prob), "log_prob": log_prob}


AGENT = sac.AGENT._replace(name="compat_ensemble", Config=Config, update=sac.make_update(
    actor_loss_fn=mean_q_actor_loss), loop_defaults=MappingProxyType({"updates_per_step": 2}))
