"""Update rules shared by the agents: Polyak averaging, TD targets and the automatic temperature."""
from __future__ import annotations

import jax
import jax.numpy as jnp
import optax


def polyak_update(params, target_params, tau):
    """target <- tau * params + (1 - tau) * target, leaf by leaf. ``tau`` may be a traced scalar."""
    return jax.tree.map(lambda p, t: tau * p + (1.0 - tau) * t, params, target_params)


def td_target(reward, terminated, next_value, gamma):
    """y = r + gamma (1 - terminated) V(s'). Truncation is deliberately absent: time limits bootstrap."""
    return reward + gamma * (1.0 - terminated.astype(reward.dtype)) * next_value


def temperature_loss(log_alpha, log_prob, target_entropy):
    """SAC's automatic temperature objective, CleanRL form: -alpha * sg(log pi + target_entropy), averaged.

    Its gradient w.r.t. log alpha is -alpha * E[log pi + H_target]: alpha grows when the policy's entropy
    (-log pi) falls below the target.
    """
    return -jnp.mean(jnp.exp(log_alpha) * jax.lax.stop_gradient(log_prob + target_entropy))


def apply_updates(params, grads, opt_state, optimizer: optax.GradientTransformation):
    """One optimizer step; returns (new_params, new_opt_state)."""
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return optax.apply_updates(params, updates), opt_state
