"""Band-limited SAC (BL-SAC; Campo, Chen, Kung, Virochsiri & Wang 2020, arXiv 2006.11431) — INFERRED construction.

    jaxrl train --agent experiments.plugins.bl_sac:AGENT --env dmc/CartpoleSwingup --bl-sac.bl-sigma 0.1

The paper band-limits the target critic by "adding a convolutional filter" to it; its method section could not be
read (docs/sources.md: abstract only, no official code). This file implements our reading,
labelled as an interpretation wherever it shows (here, its docs page, ``--help``): a Gaussian low-pass filter over the
next action, estimated by Monte Carlo with K draws,

    Qtilde(s', a') = 1/K sum_k min_j Qbar_j(s', clip(a' + eps_k, -1, 1)),   eps_k ~ N(0, sigma^2 I), a' ~ pi(.|s')
    y = r + gamma (1 - d) (Qtilde(s', a') - alpha log pi(a'|s'))

The online critics, the actor and the temperature are SAC's, unchanged; no extra state. K = 1 with no clip is TD3's
target-policy smoothing applied to SAC. Hook: ``sac.make_update(target_fn=...)``.

(inferred, every one: none of these comes from the paper) the kernel (Gaussian), its variable (the action; the
next observation as well with ``bl_on_state``), the estimator (K Monte Carlo draws, default 4), the width (0.1;
worth sweeping over {0.05, 0.1, 0.2}), no noise clipping by default.
"""
from __future__ import annotations

import flax.struct
import jax
import jax.numpy as jnp

from agents import sac
from jaxrl import checks
from jaxrl.losses import target_or_online, td_target
from jaxrl.networks import sample_tanh_gaussian

static = lambda default: flax.struct.field(pytree_node=False, default=default)  # noqa: E731


@flax.struct.dataclass
class Config(sac.Config):
    bl_sigma: float = 0.1
    """(inferred) std of the Gaussian filter over the target critic's action (0: SAC's target)"""
    bl_samples: int = static(4)
    """(inferred) Monte Carlo draws K of the filter per transition (K target-critic passes per update)"""
    bl_noise_clip: float | None = None
    """(inferred) clip each draw to [-c, c] as TD3 does (None: no clip)"""
    bl_on_state: bool = static(False)
    """(inferred) filter over the next observation as well, with the same std (the other reading of the abstract)"""


def filter_draws(key, shape, cfg: Config):
    """K draws eps_k ~ N(0, sigma^2 I) of ``shape`` each, clipped to [-c, c] when ``bl_noise_clip`` is set."""
    eps = cfg.bl_sigma * jax.random.normal(key, (cfg.bl_samples, *shape))
    return eps if cfg.bl_noise_clip is None else jnp.clip(eps, -cfg.bl_noise_clip, cfg.bl_noise_clip)


def band_limited_target(state: sac.State, batch, key, cfg: Config):
    """y = r + gamma (1 - d)(1/K sum_k min_j Qbar_j(s'_k, clip(a' + eps_k)) - alpha log pi(a'|s')), no gradient;
    s'_k = s' (or s' + its own Gaussian draw with ``bl_on_state``)."""
    policy_key, action_key, state_key = jax.random.split(key, 3)
    next_mean, next_log_std = state.actor.apply(state.actor_params, batch.next_obs)
    next_action, next_log_prob = sample_tanh_gaussian(policy_key, next_mean, next_log_std)
    actions = jnp.clip(next_action + filter_draws(action_key, next_action.shape, cfg), -1.0, 1.0)  # [K, B, A]
    next_obs = batch.next_obs
    target_params = target_or_online(state.target_critic_params, state.critic_params)
    if cfg.bl_on_state:
        leaves, treedef = jax.tree.flatten(next_obs)
        keys = jax.random.split(state_key, len(leaves))
        next_obs = treedef.unflatten([x + filter_draws(k, x.shape, cfg) for x, k in zip(leaves, keys, strict=True)])
        q = jax.vmap(lambda o, a: state.critic.apply(target_params, o, a))(next_obs, actions)
    else:
        q = jax.vmap(lambda a: state.critic.apply(target_params, next_obs, a))(actions)
    smoothed = jnp.mean(jnp.min(q[..., 0], axis=1), axis=0)  # [K, num_critics, B] -> [B]
    next_value = smoothed - jnp.exp(state.log_alpha) * next_log_prob
    return jax.lax.stop_gradient(td_target(batch, next_value))


def check_config(cfg: Config) -> None:
    sac.check_config(cfg)
    checks.non_negative(cfg, "bl_sigma")
    checks.positive_ints(cfg, "bl_samples")
    if cfg.bl_noise_clip is not None:
        checks.positive(cfg, "bl_noise_clip")


AGENT = sac.AGENT._replace(name="bl_sac", Config=Config, check_config=check_config,
                           update=sac.make_update(target_fn=band_limited_target))
