"""A schedule over state.progress in a loss and in act (README hook table, 2026-12-05)."""
import jax
import jax.numpy as jnp
import optax

from agents import sac


def annealed_huber_loss(critic_params, state, batch, key, cfg):  # Huber's delta from 10 to 1 over half the run
    delta = state.progress.interpolate(10.0, 1.0, over=0.5)
    target = sac.soft_td_target(state, batch, key, cfg)
    q = state.critic.apply(critic_params, batch.obs, batch.action)[..., 0]
    loss = jnp.sum(jnp.mean(optax.huber_loss(q, target, delta=delta), axis=-1))
    return loss, {"critic_loss": loss, "huber_delta": delta}


def decaying_noise_act(state, obs, key, cfg, deterministic=False, carry=()):  # extra noise, 0.3 -> 0 by mid-run
    action, carry = sac.act(state, obs, key, cfg, deterministic, carry)
    if deterministic:
        return action, carry
    noise = state.progress.interpolate(0.3, 0.0, over=0.5) * jax.random.normal(key, action.shape)
    return jnp.clip(action + noise, -1.0, 1.0), carry


AGENT = sac.AGENT._replace(name="compat_annealed", act=decaying_noise_act,
                           update=sac.make_update(critic_loss_fn=annealed_huber_loss))
