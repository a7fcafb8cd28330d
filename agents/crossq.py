"""CrossQ: SAC without target networks, with Batch Renormalization (Bhatt, Palenicek et al., ICLR 2024).

Reads top to bottom: Config -> State -> losses (one pure function each) -> init / act / update -> AGENT.

The idea: normalise the critics' activations with batch statistics, and compute Q(s, a) and Q(s', a') in one
training pass over the concatenated batch [s; s'], [a; a'], so both halves are normalised with the same
statistics (two passes would normalise them differently, and the target would see statistics the online values
never do). The TD target is the next-state half of that pass under stop_gradient: no target network, no Polyak
step. Everything else is SAC with automatic temperature.

Defaults follow the official code (adityab/CrossQ a318a26, ``train.py -algo crossq`` and the paper runs'
``slurm/submit_everything.sh``; docs/sources.md):
  * critics: 2 x [BRN(s, a) -> (Dense 2048 -> ReLU -> BRN) x 2 -> Dense 1]; actor: BRN(s) -> (Dense 256 -> ReLU ->
    BRN) x 2 -> (mean, log std), log std clipped to [-20, 2]; flax's default lecun_normal kernels;
  * Batch Renormalization (``jaxrl.networks.BatchRenorm``): momentum 0.99, eps 1e-3, r_max 3, d_max 5, plain batch
    norm for each layer's first 100k training passes; in the critics and in the actor (``bn_mode='brn_actor'``);
  * Adam with beta1 = 0.5 (beta2 0.999) for the actor and critics, plain Adam for the temperature; lr 1e-3 for all
    three (the paper's DMC runs used 8e-4: the ``crossq_dmc`` config);
  * batch 256, gamma 0.99, one update per env step, the actor and temperature every 3rd critic update
    (``(n_updates + 1) % 3 == 0``), alpha_0 = 1, target entropy -|A|, 5000 random steps first;
  * critic loss 0.5 * sum over critics of the batch-mean squared TD error; the next action from the current actor
    in inference mode; the actor loss with the actor in training mode (its statistics move) and the critics in
    inference mode (theirs do not), after this update's critic step;
  * the temperature loss alpha (H - H_target) (the official code's; SBX later moved to log alpha).
Deviations, all deliberate: the policy's two heads are one Dense of 2|A| outputs (the same function and
initial distribution); the BRN of a unit dead over a whole batch has a zero gradient where the official
expression's is NaN (``BatchRenorm``'s docstring); the loop's default warm-up (5000 env steps, a tenth of a
shorter run) instead of a fixed 5000.
To change a loss without editing this file: ``make_update(critic_loss_fn=my_loss)``.
"""
from __future__ import annotations

from typing import Any

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp

from jaxrl import ConfigError, checks
from jaxrl.agent import Agent, delay_fields, extra_field
from jaxrl.losses import init_temperature, td_target, temperature_loss
from jaxrl.networks import CriticEnsemble, GaussianPolicyHead, forward, reading, sample_tanh_gaussian, tanh_gaussian_act
from jaxrl.optim import (
    NETWORK_STATE,
    OptimizerConfig,
    adam,
    delayed_step,
    every_nth,
    grad_norm_metrics,
    gradient_step,
    trainable,
)
from jaxrl.progress import Progress, progress_field
from jaxrl.types import Batch, EnvSpec, zeros_obs

static = lambda default: flax.struct.field(pytree_node=False, default=default)  # noqa: E731


@flax.struct.dataclass
class Config(OptimizerConfig):  # Adam's betas (here 0.5, 0.999), eps, weight decay, clipping, lr schedule
    actor_hidden_sizes: tuple[int, ...] = static((256, 256))
    """hidden layer widths of the actor"""
    critic_hidden_sizes: tuple[int, ...] = static((2048, 2048))
    """hidden layer widths of each critic (the official code's; SBX and sb3-contrib default to 1024)"""
    batch_size: int = static(256)
    """transitions per gradient update (the critics' joint pass normalises over twice as many rows)"""
    n_step: int = static(1)
    """rewards summed per sampled transition before bootstrapping (1: the official one-step target)"""
    num_critics: int = static(2)
    """critics in the ensemble; the target and the actor take the minimum over them"""
    policy_delay: int = static(3)
    """the actor and the temperature step every policy_delay-th critic update"""
    actor_batch_renorm: bool = static(True)
    """Batch Renormalization in the actor too (official ``bn_mode='brn_actor'``); False: a plain MLP actor"""
    batch_renorm_momentum: float = static(0.99)
    """momentum of the running statistics of every BRN layer"""
    batch_renorm_warmup: int = static(100_000)
    """training passes of each BRN layer as plain batch norm before r and d switch on"""
    log_std_min: float = static(-20.0)
    """lower clip of the policy's log std"""
    log_std_max: float = static(2.0)
    """upper clip of the policy's log std"""
    actor_lr: float = 1e-3
    """Adam learning rate of the actor"""
    critic_lr: float = 1e-3
    """Adam learning rate of the critics"""
    alpha_lr: float = 1e-3
    """Adam learning rate of log alpha (plain Adam: betas 0.9, 0.999)"""
    adam_b1: float = 0.5
    """Adam's beta1 for the actor and the critics (the temperature keeps plain Adam's 0.9, officially)"""
    adam_b2: float = 0.999
    """Adam's beta2 for the actor and the critics (the temperature keeps 0.999)"""
    gamma: float = 0.99
    """discount"""
    init_alpha: float = 1.0
    """initial temperature alpha"""
    target_entropy: float | None = None
    """entropy target; None means -|A|"""


@flax.struct.dataclass
class State:
    actor_params: Any  # {"params": ..., "batch_stats": ...} (no batch_stats with actor_batch_renorm off)
    critic_params: Any  # {"params": ..., "batch_stats": ...}; no target copy
    log_alpha: jax.Array
    target_entropy: jax.Array
    actor_opt_state: Any
    critic_opt_state: Any
    alpha_opt_state: Any
    actor: nn.Module = flax.struct.field(pytree_node=False)
    critic: nn.Module = flax.struct.field(pytree_node=False)
    progress: Progress | None = progress_field()
    extra: Any = extra_field()  # a plug-in's own learned state; the engine never touches it
    num_updates: jax.Array | None = flax.struct.field(default=None, kw_only=True)  # critic updates so far
    last_actor_metrics: dict[str, jax.Array] | None = flax.struct.field(default=None, kw_only=True)


# ---------------------------------------------------------------------------------------------- losses


def joined(first, second):
    """[first; second] along the batch axis, leaf by leaf (structured observations too)."""
    return jax.tree.map(lambda a, b: jnp.concatenate([a, b], axis=0), first, second)


def critic_loss(critic_params, state: State, batch: Batch, key, cfg: Config):
    """0.5 sum_j E[(Q_j(s, a) - y)^2], y = r + gamma (1 - terminated)(min_j sg(Q_j(s', a')) - alpha log pi(a'|s')):
    Q(s, a) and Q(s', a') from one training pass over [s; s'], [a; a'] (shared batch statistics), a' ~ pi(.|s')
    with the actor in inference mode. Returns the critics' new statistics as aux[NETWORK_STATE]."""
    (next_mean, next_log_std), _ = forward(state.actor, state.actor_params, batch.next_obs)
    next_action, next_log_prob = sample_tanh_gaussian(key, next_mean, next_log_std)
    q_both, statistics = forward(state.critic, critic_params, joined(batch.obs, batch.next_obs),
                                 jnp.concatenate([batch.action, next_action], axis=0), train=True)
    q, next_q = jnp.split(q_both[..., 0], 2, axis=1)  # [num_critics, B] each
    next_value = jnp.min(next_q, axis=0) - jnp.exp(state.log_alpha) * next_log_prob
    target = jax.lax.stop_gradient(td_target(batch, next_value))
    loss = 0.5 * jnp.sum(jnp.mean(jnp.square(q - target), axis=-1))
    return loss, {"critic_loss": loss, "q_mean": jnp.mean(q), "target_mean": jnp.mean(target),
                  NETWORK_STATE: statistics}


def actor_loss(actor_params, state: State, batch: Batch, key, cfg: Config):
    """E[alpha log pi(a|s) - min_j Q_j(s, a)], a reparameterised; the actor in training mode (its new statistics in
    aux[NETWORK_STATE]), the critics in inference mode. aux["log_prob"] feeds the temperature loss."""
    (mean, log_std), statistics = forward(state.actor, actor_params, batch.obs, train=True)
    action, log_prob = sample_tanh_gaussian(key, mean, log_std)
    q, _ = forward(state.critic, state.critic_params, batch.obs, action)
    alpha = jnp.exp(jax.lax.stop_gradient(state.log_alpha))
    loss = jnp.mean(alpha * log_prob - jnp.min(q[..., 0], axis=0))
    return loss, {"actor_loss": loss, "entropy": -jnp.mean(log_prob), "log_prob": log_prob,
                  NETWORK_STATE: statistics}


def alpha_loss(log_alpha, state: State, log_prob, cfg: Config):
    """alpha (H - H_target), H = -E[log pi] from the actor loss's pass (the official form)."""
    loss = temperature_loss(log_alpha, log_prob, state.target_entropy)
    return loss, {"alpha_loss": loss, "alpha": jnp.exp(log_alpha)}


# ------------------------------------------------------------------------------------- init / act / update


def optimizers(cfg: Config, progress: Progress | None = None):
    """Built from cfg at every call so learning rates and betas may be traced values (sweeps vmap over them);
    ``progress`` (``state.progress``) feeds ``lr_schedule``. The temperature's Adam keeps betas (0.9, 0.999)."""
    return (adam(cfg, cfg.actor_lr, progress), adam(cfg, cfg.critic_lr, progress),
            adam(cfg, cfg.alpha_lr, progress, weight_decay=False, adam_b1=0.9, adam_b2=0.999))


def check_config(cfg: Config) -> None:
    """Called by the loop on the host with concrete values before compiling (inside, numeric fields are traced)."""
    checks.positive_ints(cfg, "actor_hidden_sizes", "critic_hidden_sizes", "batch_size", "n_step", "num_critics",
                         "policy_delay")
    checks.bounds_ordered(cfg, "log_std_min", "log_std_max")
    checks.positive(cfg, "actor_lr", "critic_lr", "alpha_lr", "init_alpha")
    checks.unit_interval(cfg, "gamma")
    checks.finite_or_none(cfg, "target_entropy")
    checks.optimizer_fields(cfg)
    checks.require(cfg, "batch_renorm_momentum", lambda x: 0 <= x < 1, "a number in [0, 1)")
    warmup = checks.as_int(cfg.batch_renorm_warmup)
    if warmup is None or warmup < 0:
        raise ConfigError(f"batch_renorm_warmup must be an integer >= 0 (training passes), got "
                          f"{checks.show(cfg.batch_renorm_warmup)}")


def networks(spec: EnvSpec, cfg: Config):
    renorm = dict(batch_renorm_momentum=cfg.batch_renorm_momentum, batch_renorm_warmup=cfg.batch_renorm_warmup,
                  kernel_init=nn.initializers.lecun_normal())
    actor_renorm = renorm if cfg.actor_batch_renorm else {"kernel_init": renorm["kernel_init"]}
    actor = GaussianPolicyHead(cfg.actor_hidden_sizes, spec.action_size, "relu", cfg.log_std_min, cfg.log_std_max,
                               squash_log_std=False, **actor_renorm)
    critic = CriticEnsemble(cfg.critic_hidden_sizes, num_critics=cfg.num_critics, **renorm)
    return reading(spec.actor_obs, actor), reading(spec.critic_obs, critic)


def init(key, spec: EnvSpec, cfg: Config) -> State:
    actor, critic = networks(spec, cfg)
    actor_key, critic_key = jax.random.split(key)
    obs = zeros_obs(spec, (1,))
    actor_params = actor.init(actor_key, obs)
    critic_params = critic.init(critic_key, obs, jnp.zeros((1, spec.action_size)))
    log_alpha, target_entropy = init_temperature(cfg.init_alpha, cfg.target_entropy, spec.action_size)
    actor_opt, critic_opt, alpha_opt = optimizers(cfg)
    return State(
        actor_params=actor_params,
        critic_params=critic_params,
        log_alpha=log_alpha,
        target_entropy=target_entropy,
        actor_opt_state=actor_opt.init(trainable(actor_params)),
        critic_opt_state=critic_opt.init(trainable(critic_params)),
        alpha_opt_state=alpha_opt.init(log_alpha),
        actor=actor,
        critic=critic,
        **delay_fields(DELAYED_METRICS),
    )


def act(state: State, obs, key, cfg: Config, deterministic: bool = False, carry=()):
    """tanh(mean) when deterministic, else a sample; the actor in inference mode (running statistics) either way."""
    return tanh_gaussian_act(state.actor, state.actor_params, obs, key, deterministic), carry


DELAYED_METRICS = ("actor_loss", "entropy", "alpha_loss", "alpha", "grad_norm/actor", "grad_norm/alpha")


def make_update(critic_loss_fn=critic_loss, actor_loss_fn=actor_loss, alpha_loss_fn=alpha_loss):
    """An ``update`` that optimises the given losses (same signatures as the defaults above)."""

    def update(state: State, batch: Batch, key, cfg: Config):
        critic_key, actor_key = jax.random.split(key)
        actor_opt, critic_opt, alpha_opt = optimizers(cfg, state.progress)
        critic = gradient_step(critic_loss_fn, state.critic_params, state.critic_opt_state, critic_opt, state, batch,
                               critic_key, cfg)
        state = state.replace(critic_params=critic.params, critic_opt_state=critic.opt_state,
                              num_updates=state.num_updates + 1)

        def actor_and_temperature(state: State):
            actor = gradient_step(actor_loss_fn, state.actor_params, state.actor_opt_state, actor_opt, state, batch,
                                  actor_key, cfg)
            log_prob = actor.aux.pop("log_prob")
            alpha = gradient_step(alpha_loss_fn, state.log_alpha, state.alpha_opt_state, alpha_opt, state, log_prob,
                                  cfg)
            state = state.replace(actor_params=actor.params, actor_opt_state=actor.opt_state, log_alpha=alpha.params,
                                  alpha_opt_state=alpha.opt_state)
            return state, {**actor.aux, **alpha.aux, **grad_norm_metrics(actor=actor, alpha=alpha)}

        state, delayed = delayed_step(every_nth(state.num_updates, cfg.policy_delay), actor_and_temperature, state)
        return state, {**critic.aux, **delayed, **grad_norm_metrics(critic=critic)}

    return update


update = make_update()

# The official values of Config's fields and where each is set (the docs' defaults table puts them beside ours).
_TRAIN, _RUNS = "adityab/CrossQ a318a26 train.py (-algo crossq)", "slurm/submit_everything.sh (MuJoCo runs)"
OFFICIAL = {
    "adam_b1": (0.5, f"{_RUNS}: B1='0.5'"), "critic_hidden_sizes": ((2048, 2048), f"{_RUNS}: N_NEURONS=2048"),
    "actor_hidden_sizes": ((256, 256), "sbx/sac/policies.py"), "batch_size": (256, _TRAIN),
    "policy_delay": (3, f"{_RUNS}: PI_DELAY='3'"), "actor_batch_renorm": (True, f"{_RUNS}: BN_MODE='brn_actor'"),
    "batch_renorm_momentum": (0.99, f"{_RUNS}: BN_MOM='0.99'"),
    "batch_renorm_warmup": (100_000, "sbx/sac/policies.py BatchRenorm warmup_steps"),
    "log_std_min": (-20.0, "sbx/sac/policies.py"), "log_std_max": (2.0, "sbx/sac/policies.py"),
    "actor_lr": (1e-3, f"{_RUNS}: LR='0.001' (DMC: 8e-4)"), "critic_lr": (1e-3, f"{_RUNS}: LR='0.001' (DMC: 8e-4)"),
    "alpha_lr": (1e-3, f"{_RUNS}: LR='0.001' (DMC: 8e-4)"), "gamma": (0.99, _TRAIN), "init_alpha": (1.0, _TRAIN),
    "target_entropy": ("-|A|", _TRAIN),
}

AGENT = Agent(name="crossq", Config=Config, init=init, act=act, update=update, check_config=check_config)
