"""REDQ (Chen, Wang, Zhou & Ross, ICLR 2021, arXiv 2101.05982) as a plug-in on SAC: a worked example of the hooks.

    jaxrl train --agent experiments.examples.redq:AGENT --env dmc/CartpoleSwingup --steps 20000

What REDQ changes in SAC, and the hook each change uses (nothing here edits agents/sac.py or the engine):
  * N = 10 critics                                   a config field:   ``num_critics``
  * the target's minimum over a random subset of     one function:     ``make_update(target_fn=redq_target)``
    M = 2 of the N target critics (Algorithm 1, l. 8)
  * the actor on the mean over all N critics (l. 13) one function:     ``make_update(actor_loss_fn=...)``
  * G = 20 critic updates per env step, the actor     loop and config:  ``updates_per_step = 20`` (loop default
    and temperature once per G (the official code's                     below), ``policy_delay = 20``
    ``policy_update_delay``)
The rest is SAC's (2x256, lr 3e-4, batch 256, automatic temperature, tau 0.005), set as the official code has
it (watchernyu/REDQ ``redq/algos/redq_sac.py`` and ``core.py`` at 11bf30d), where SAC's defaults differ:
  * the temperature's loss in log-alpha form, -log alpha * sg(log pi + target entropy) (``log_alpha_loss``;
    SAC's alpha form has the same fixed point and alpha times the gradient);
  * the policy's log std clipped to [-20, 2] (``LOG_SIG_MIN``/``MAX``; SAC squashes it into [-5, 2]) and its
    log-density with 1e-6 inside log(1 - tanh(u)^2 + 1e-6) (``ACTION_BOUND_EPSILON``);
  * the actor's and temperature's losses read the critics from before this update's critic step (the code builds
    its policy loss before ``q_optimizer.step()``). (The code then calls ``policy_loss.backward()`` after that
    step; under the PyTorch of its time, whose optimisers wrote ``p.data`` in place, that backward pass multiplied
    by the stepped weight matrices: a mix of the two, which we do not reproduce.)
  * target entropy: the code's default ``'mbpo'`` reads MBPO's per-task table (Hopper -1, HalfCheetah -3,
    Walker2d -3, Ant -4, Humanoid -2), which ``--config redq_mbpo`` sets for Brax's versions of those tasks; the
    code has no value for other tasks, where this example keeps -|A| (the code's ``'auto'``).
Each is a field whose default is the official behaviour; ``log_alpha_loss=False``, ``squash_log_std=True
log_std_min=-5``, ``log_prob_epsilon=None`` and ``actor_on_stepped_critics=True`` give SAC's. One subset is drawn
per update for the whole batch, as the official ``np.random.choice(num_Q, num_min, replace=False)``; all N target
critics are evaluated and M of them read (the official code evaluates only the M: the same values).
"""
from __future__ import annotations

from types import MappingProxyType

import flax.struct
import jax
import jax.numpy as jnp

from agents import sac
from jaxrl import checks
from jaxrl.agent import added_field
from jaxrl.losses import target_or_online, td_target
from jaxrl.networks import sample_tanh_gaussian

static = lambda default: flax.struct.field(pytree_node=False, default=default)  # noqa: E731


@flax.struct.dataclass
class Config(sac.Config):
    num_critics: int = static(10)
    """N: critics in the ensemble"""
    policy_delay: int = static(20)
    """critic updates per actor and temperature update (the official policy_update_delay, = G)"""
    num_target_critics: int = static(2)
    """M: target critics whose minimum forms the target, a fresh random subset at every update"""
    log_std_min: float = static(-20.0)
    """lower bound of the policy's log std (the code's LOG_SIG_MIN)"""
    squash_log_std: bool = added_field(False, before=True)
    """False: log std clipped into [log_std_min, log_std_max], as the code; True: SAC's smooth squash"""
    log_prob_epsilon: float | None = added_field(1e-6, before=None)
    """the 1e-6 inside log(1 - tanh(u)^2 + eps) of the code's log-density (None: the exact density, SAC's)"""
    log_alpha_loss: bool = added_field(True, before=False)
    """the temperature's loss in log-alpha form, as the code (False: SAC's alpha form)"""
    actor_on_stepped_critics: bool = added_field(False, before=True)
    """False: the actor's loss reads the critics before this update's critic step, as the code (True: SAC's)"""


def redq_target(state: sac.State, batch, key, cfg: Config):
    """y = r + gamma (1 - terminated)(min_{j in M} Qbar_j(s', a') - alpha log pi(a'|s')), M a random subset of
    ``num_target_critics`` of the N target critics, a' ~ pi(.|s'); no gradient."""
    action_key, subset_key = jax.random.split(key)
    next_mean, next_log_std = state.actor.apply(state.actor_params, batch.next_obs)
    next_action, next_log_prob = sample_tanh_gaussian(action_key, next_mean, next_log_std, cfg.log_prob_epsilon)
    target_params = target_or_online(state.target_critic_params, state.critic_params)  # None: no copies kept
    next_q = state.critic.apply(target_params, batch.next_obs, next_action)[..., 0]  # [N, B]
    subset = jax.random.choice(subset_key, cfg.num_critics, (cfg.num_target_critics,), replace=False)
    next_value = jnp.min(next_q[subset], axis=0) - jnp.exp(state.log_alpha) * next_log_prob
    return jax.lax.stop_gradient(td_target(batch, next_value))


def mean_q_actor_loss(actor_params, state: sac.State, batch, key, cfg: Config):
    """E[alpha log pi(a|s) - mean_j Q_j(s, a)] over all N critics, a reparameterised."""
    mean, log_std = state.actor.apply(actor_params, batch.obs)
    action, log_prob = sample_tanh_gaussian(key, mean, log_std, cfg.log_prob_epsilon)
    q = state.critic.apply(state.critic_params, batch.obs, action)[..., 0]
    loss = jnp.mean(jnp.exp(jax.lax.stop_gradient(state.log_alpha)) * log_prob - jnp.mean(q, axis=0))
    return loss, {"actor_loss": loss, "entropy": -jnp.mean(log_prob), "log_prob": log_prob}


def check_config(cfg: Config) -> None:
    sac.check_config(cfg)
    checks.positive_ints(cfg, "num_target_critics")
    if cfg.num_target_critics > cfg.num_critics:
        from jaxrl import ConfigError

        raise ConfigError(f"num_target_critics={cfg.num_target_critics} must be at most num_critics="
                          f"{cfg.num_critics} (a subset of the critics)")


def update(state: sac.State, batch, key, cfg: Config):
    """SAC's update with REDQ's target and actor loss; the official code's temperature form and critic order."""
    return sac.make_update(actor_loss_fn=mean_q_actor_loss, target_fn=redq_target,
                           alpha_loss_fn=sac.log_alpha_loss if cfg.log_alpha_loss else sac.alpha_loss,
                           actor_on_stepped_critics=cfg.actor_on_stepped_critics)(state, batch, key, cfg)


AGENT = sac.AGENT._replace(
    name="redq", Config=Config, check_config=check_config, update=update,
    loop_defaults=MappingProxyType(dict(updates_per_step=20.0)))  # G = 20 updates per env step (UTD ratio)
