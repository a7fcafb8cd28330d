"""A swapped critic loss (README, "Plugging in your own idea", 2026-12-05)."""
import jax.numpy as jnp
import optax

from agents import sac


def huber_critic_loss(critic_params, state, batch, key, cfg):
    target = sac.soft_td_target(state, batch, key, cfg)
    q = state.critic.apply(critic_params, batch.obs, batch.action)[..., 0]  # [2 critics, batch]
    loss = jnp.sum(jnp.mean(optax.huber_loss(q, target, delta=1.0), axis=-1))
    return loss, {"critic_loss": loss, "q_mean": jnp.mean(q)}


AGENT = sac.AGENT._replace(name="compat_huber", update=sac.make_update(critic_loss_fn=huber_critic_loss))
