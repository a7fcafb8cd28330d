"""Soft Actor-Critic with automatic temperature (Haarnoja et al. 2018, arXiv 1812.05905).

Reads top to bottom: Config -> State -> losses (one pure function each) -> init / act / update -> AGENT.

Defaults follow the paper's hyperparameters (arXiv 1812.05905, Table 1) and CleanRL's
`sac_continuous_action.py`: 2x256 ReLU MLPs, lr 3e-4 everywhere, batch 256, gamma 0.99, tau 0.005, alpha_0 = 1,
target entropy -|A|, one update per transition, update order critic -> actor -> temperature -> Polyak (CleanRL).
Deviations, all deliberate:
  * log std is squashed smoothly into [-5, 2] (CleanRL) rather than clipped to [-20, 2] (softlearning);
  * weights use lecun_uniform with zero biases (Brax) rather than PyTorch's default init;
  * the critic loss is the sum over the twin critics of the mean squared TD error (CleanRL), i.e. twice the
    paper's 1/2-MSE per critic — Adam makes the scale irrelevant up to epsilon.
To change a loss without editing this file: ``make_update(critic_loss_fn=my_loss)`` (docs/plugins/index.md).
"""
from __future__ import annotations

from typing import Any

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp

from jaxrl import checks
from jaxrl.agent import Agent, added_field, delay_fields, extra_field
from jaxrl.losses import (
    init_temperature,
    log_temperature_loss,
    polyak_update,
    target_or_online,
    td_target,
    temperature_loss,
    with_target,
)
from jaxrl.networks import CriticEnsemble, GaussianPolicyHead, forward, reading, sample_tanh_gaussian, tanh_gaussian_act
from jaxrl.optim import (
    OptimizerConfig,
    adam,
    delayed_step,
    every_nth,
    grad_norm_metrics,
    gradient_step,
    network_state,
    trainable,
)
from jaxrl.progress import Progress, progress_field
from jaxrl.types import Batch, EnvSpec, zeros_obs

static = lambda default: flax.struct.field(pytree_node=False, default=default)  # noqa: E731


@flax.struct.dataclass
class Config(OptimizerConfig):  # Adam's betas, eps, weight decay, clipping, lr schedule
    hidden_sizes: tuple[int, ...] = static((256, 256))
    """hidden layer widths of the actor and of each critic"""
    batch_size: int = static(256)
    """transitions per gradient update"""
    n_step: int = static(1)
    """rewards summed per sampled transition before bootstrapping (n-step returns; 1 = the paper's one-step target)"""
    critic_layer_norm: bool = static(False)
    """LayerNorm after each hidden layer of the critics (Playground's DMC config turns it on)"""
    num_critics: int = added_field(2)
    """critics in the ensemble; the target and the actor take the minimum over all of them (2: clipped double Q)"""
    policy_delay: int = added_field(1)
    """the actor and the temperature step every policy_delay-th critic update (1: every update, the paper; REDQ's
    G = 20 delays them), the targets move after every update"""
    log_std_min: float = static(-5.0)
    """lower bound of the policy's log std"""
    log_std_max: float = static(2.0)
    """upper bound of the policy's log std"""
    squash_log_std: bool = added_field(True)
    """log std mapped smoothly into [log_std_min, log_std_max] (CleanRL); False: clipped there (softlearning, the
    official REDQ)"""
    actor_lr: float = 3e-4
    """Adam learning rate of the actor"""
    critic_lr: float = 3e-4
    """Adam learning rate of the twin critics"""
    alpha_lr: float = 3e-4
    """Adam learning rate of log alpha"""
    gamma: float = 0.99
    """discount"""
    tau: float = 0.005
    """Polyak rate of the target critics"""
    target_update_period: int = added_field(1)
    """the targets' Polyak step on the 1st, (1 + p)-th, (1 + 2p)-th, ... update (pytorch_sac's
    critic_target_update_frequency 2, counted from its first update); 1: every update"""
    init_alpha: float = 1.0
    """initial temperature alpha"""
    target_entropy: float | None = None
    """entropy target; None means -|A| (the paper's rule; Brax and Playground use -0.5|A|)"""
    target_networks: bool = added_field(True)
    """target critics moved by Polyak averaging (tau); False: the TD target reads the online critics under
    stop_gradient, with no copy kept and no Polyak step"""
    critic_dropout: float = added_field(0.0)
    """dropout rate after each hidden Dense of the critics, on in every critic pass of training (DroQ: 0.01)"""
    critic_layer_norm_first: bool = added_field(False)
    """with critic_layer_norm: Dense -> (dropout) -> LayerNorm -> ReLU (DroQ's order) instead of Dense -> ReLU ->
    LayerNorm"""


@flax.struct.dataclass
class State:
    actor_params: Any
    critic_params: Any
    target_critic_params: Any
    log_alpha: jax.Array
    target_entropy: jax.Array
    actor_opt_state: Any
    critic_opt_state: Any
    alpha_opt_state: Any
    actor: nn.Module = flax.struct.field(pytree_node=False)
    critic: nn.Module = flax.struct.field(pytree_node=False)
    progress: Progress | None = progress_field()  # where the run is, set by the loop for act/update
    extra: Any = extra_field()  # a plug-in's own learned state; the engine never touches it
    # With policy_delay > 1 only (None otherwise, so the state and its checkpoints are as before): critic updates
    # so far, and the last actor and temperature step's metrics, repeated on the updates in between.
    num_updates: jax.Array | None = flax.struct.field(default=None, kw_only=True)
    last_actor_metrics: dict[str, jax.Array] | None = flax.struct.field(default=None, kw_only=True)


# ---------------------------------------------------------------------------------------------- losses


def soft_td_target(state: State, batch: Batch, key, cfg: Config):
    """y = r + gamma (1 - terminated)(min_j Qbar_j(s', a') - alpha log pi(a'|s')), a' ~ pi(.|s'), no gradient
    (Qbar: the target critics, or the online ones under stop_gradient with ``target_networks`` off)."""
    next_mean, next_log_std = state.actor.apply(state.actor_params, batch.next_obs)
    next_action, next_log_prob = sample_tanh_gaussian(key, next_mean, next_log_std)
    next_q, _ = forward(state.critic, target_or_online(state.target_critic_params, state.critic_params),
                        batch.next_obs, next_action, train=True, key=jax.random.fold_in(key, 1))
    next_value = jnp.min(next_q[..., 0], axis=0) - jnp.exp(state.log_alpha) * next_log_prob
    return jax.lax.stop_gradient(td_target(batch, next_value))


def critic_loss(critic_params, state: State, batch: Batch, key, cfg: Config, target_fn=soft_td_target):
    """sum_j E[(Q_j(s, a) - y)^2] with the TD target y = target_fn(...) (default: the soft TD target). Every critic
    pass here is a training pass (dropout on, keys folded from ``key``); the critics' new statistics, if they have
    any, return as aux[NETWORK_STATE]."""
    target = target_fn(state, batch, key, cfg)
    q, statistics = forward(state.critic, critic_params, batch.obs, batch.action, train=True,
                            key=jax.random.fold_in(key, 2))
    q = q[..., 0]  # [num_critics, B]
    loss = jnp.sum(jnp.mean(jnp.square(q - target), axis=-1))
    return loss, {"critic_loss": loss, "q_mean": jnp.mean(q), "target_mean": jnp.mean(target),
                  **network_state(statistics)}


def actor_loss(actor_params, state: State, batch: Batch, key, cfg: Config):
    """E[alpha log pi(a|s) - min_j Q_j(s, a)], a reparameterised. aux["log_prob"] feeds the temperature loss."""
    (mean, log_std), statistics = forward(state.actor, actor_params, batch.obs, train=True,
                                          key=jax.random.fold_in(key, 1))
    action, log_prob = sample_tanh_gaussian(key, mean, log_std)
    q, _ = forward(state.critic, state.critic_params, batch.obs, action, train=True, key=jax.random.fold_in(key, 2))
    alpha = jnp.exp(jax.lax.stop_gradient(state.log_alpha))
    loss = jnp.mean(alpha * log_prob - jnp.min(q[..., 0], axis=0))
    return loss, {"actor_loss": loss, "entropy": -jnp.mean(log_prob), "log_prob": log_prob,
                  **network_state(statistics)}


def alpha_loss(log_alpha, state: State, log_prob, cfg: Config):
    """Automatic temperature (CleanRL form), reusing the actor loss's log pi: no second policy pass."""
    loss = temperature_loss(log_alpha, log_prob, state.target_entropy)
    return loss, {"alpha_loss": loss, "alpha": jnp.exp(log_alpha)}


def log_alpha_loss(log_alpha, state: State, log_prob, cfg: Config):
    """The log-alpha form, -log alpha * sg(log pi + target entropy) (SB3, and the official codes of REDQ, DR-SAC
    and ACE): the same fixed point as ``alpha_loss``, with a gradient 1/alpha times as large. An ``alpha_loss_fn``."""
    loss = log_temperature_loss(log_alpha, log_prob, state.target_entropy)
    return loss, {"alpha_loss": loss, "alpha": jnp.exp(log_alpha)}


# ------------------------------------------------------------------------------------- init / act / update


def optimizers(cfg: Config, progress: Progress | None = None):
    """Built from cfg at every call so learning rates may be traced values (sweeps vmap over them); ``progress``
    (``state.progress``) feeds ``lr_schedule``."""
    return adam(cfg, cfg.actor_lr, progress), adam(cfg, cfg.critic_lr, progress), adam(cfg, cfg.alpha_lr, progress,
                                                                                     weight_decay=False)


def check_config(cfg: Config) -> None:
    """Called by the loop on the host with concrete values before compiling (inside, numeric fields are traced)."""
    checks.positive_ints(cfg, "hidden_sizes", "batch_size", "n_step", "num_critics", "policy_delay")
    checks.bounds_ordered(cfg, "log_std_min", "log_std_max")
    checks.positive(cfg, "actor_lr", "critic_lr", "alpha_lr", "init_alpha")
    checks.unit_interval(cfg, "gamma", "tau")
    checks.positive_ints(cfg, "target_update_period")
    checks.finite_or_none(cfg, "target_entropy")
    checks.optimizer_fields(cfg)
    checks.require(cfg, "critic_dropout", lambda x: 0 <= x < 1, "a number in [0, 1)")


def init(key, spec: EnvSpec, cfg: Config) -> State:
    actor = reading(spec.actor_obs, GaussianPolicyHead(cfg.hidden_sizes, spec.action_size, "relu", cfg.log_std_min,
                                                       cfg.log_std_max, squash_log_std=cfg.squash_log_std))
    critic = reading(spec.critic_obs, CriticEnsemble(cfg.hidden_sizes, num_critics=cfg.num_critics,
                                                     layer_norm=cfg.critic_layer_norm,
                                                     layer_norm_first=cfg.critic_layer_norm_first,
                                                     dropout_rate=cfg.critic_dropout))
    actor_key, critic_key = jax.random.split(key)
    obs = zeros_obs(spec, (1,))
    action = jnp.zeros((1, spec.action_size))
    actor_params = actor.init(actor_key, obs)
    critic_params = critic.init(critic_key, obs, action)
    log_alpha, target_entropy = init_temperature(cfg.init_alpha, cfg.target_entropy, spec.action_size)
    actor_opt, critic_opt, alpha_opt = optimizers(cfg)
    return State(
        actor_params=actor_params,
        critic_params=critic_params,
        target_critic_params=critic_params if cfg.target_networks else None,
        log_alpha=log_alpha,
        target_entropy=target_entropy,
        actor_opt_state=actor_opt.init(trainable(actor_params)),
        critic_opt_state=critic_opt.init(trainable(critic_params)),
        alpha_opt_state=alpha_opt.init(log_alpha),
        actor=actor,
        critic=critic,
        **(delay_fields(DELAYED_METRICS) if cfg.policy_delay > 1 else
           {"num_updates": jnp.zeros((), jnp.int32)} if cfg.target_update_period > 1 else {}),
    )


def act(state: State, obs, key, cfg: Config, deterministic: bool = False, carry=()):
    return tanh_gaussian_act(state.actor, state.actor_params, obs, key, deterministic), carry


# What the actor and temperature steps report (the updates in between repeat them when policy_delay > 1).
DELAYED_METRICS = ("actor_loss", "entropy", "alpha_loss", "alpha", "grad_norm/actor", "grad_norm/alpha")


def make_update(critic_loss_fn=critic_loss, actor_loss_fn=actor_loss, alpha_loss_fn=alpha_loss, target_fn=None,
                actor_on_stepped_critics: bool = True):
    """An ``update`` that optimises the given losses (same signatures as the defaults above); ``target_fn``
    replaces the critic loss's TD target alone (same signature as ``soft_td_target``). ``actor_on_stepped_critics``
    False: the actor and temperature losses read the critics as they were before this update's critic step (the
    official REDQ computes its policy loss before stepping the critics)."""
    critic_loss_fn = with_target(critic_loss_fn, target_fn)

    def update(state: State, batch: Batch, key, cfg: Config):
        critic_key, actor_key = jax.random.split(key)
        actor_opt, critic_opt, alpha_opt = optimizers(cfg, state.progress)
        critics_before_step = state.critic_params

        critic = gradient_step(critic_loss_fn, state.critic_params, state.critic_opt_state, critic_opt, state, batch,
                               critic_key, cfg)
        state = state.replace(critic_params=critic.params, critic_opt_state=critic.opt_state)

        def actor_and_temperature(state: State):
            seen = state if actor_on_stepped_critics else state.replace(critic_params=critics_before_step)
            actor = gradient_step(actor_loss_fn, state.actor_params, state.actor_opt_state, actor_opt, seen, batch,
                                  actor_key, cfg)
            log_prob = actor.aux.pop("log_prob")
            alpha = gradient_step(alpha_loss_fn, state.log_alpha, state.alpha_opt_state, alpha_opt, seen, log_prob,
                                  cfg)
            state = state.replace(actor_params=actor.params, actor_opt_state=actor.opt_state, log_alpha=alpha.params,
                                  alpha_opt_state=alpha.opt_state)
            return state, {**actor.aux, **alpha.aux, **grad_norm_metrics(actor=actor, alpha=alpha)}

        if cfg.policy_delay > 1 or cfg.target_update_period > 1:
            state = state.replace(num_updates=state.num_updates + 1)
        if cfg.policy_delay == 1:
            state, delayed = actor_and_temperature(state)
        else:
            state, delayed = delayed_step(every_nth(state.num_updates, cfg.policy_delay), actor_and_temperature, state)
        targets = polyak_update(state.critic_params, state.target_critic_params, cfg.tau)
        if cfg.target_update_period > 1 and targets is not None:
            turn = every_nth(state.num_updates - 1, cfg.target_update_period)
            targets = jax.tree.map(lambda new, old: jnp.where(turn, new, old), targets, state.target_critic_params)
        state = state.replace(target_critic_params=targets)
        return state, {**critic.aux, **delayed, **grad_norm_metrics(critic=critic)}

    return update


update = make_update()

# The official values of Config's fields and where each is set (the docs' defaults table puts them beside ours).
_PAPER, _CLEANRL = "arXiv 1812.05905 Table 1", "CleanRL sac_continuous_action.py"
OFFICIAL = {
    "hidden_sizes": ((256, 256), f"{_PAPER}: 2 layers of 256"), "batch_size": (256, _PAPER),
    "actor_lr": (3e-4, _PAPER), "critic_lr": (3e-4, _PAPER), "alpha_lr": (3e-4, _PAPER), "gamma": (0.99, _PAPER),
    "tau": (0.005, _PAPER), "target_update_period": (1, f"{_PAPER}: target update interval"),
    "target_entropy": ("-|A|", f"{_PAPER}: -dim(A)"), "num_critics": (2, f"{_PAPER}: two Q-functions"),
    "log_std_min": (-5.0, f"{_CLEANRL} LOG_STD_MIN, squashed by tanh"), "log_std_max": (2.0, _CLEANRL),
}

AGENT = Agent(name="sac", Config=Config, init=init, act=act, update=update, check_config=check_config)
