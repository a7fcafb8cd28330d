"""TQC: Truncated Quantile Critics (Kuznetsov et al. 2020, arXiv 2005.04269).

Reads top to bottom: Config -> State -> losses -> init / act / update -> AGENT.

Defaults follow the official code (SamsungLabs/tqc_pytorch `main.py`, `tqc/trainer.py`, `tqc/structures.py`):
N = 5 critics of [512, 512, 512] with M = 25 quantiles each, actor [256, 256] with log std clipped to [-20, 2],
lr 3e-4, batch 256, gamma 0.99, tau 0.005, d = 2 top atoms dropped per critic (a per-env knob: HalfCheetah 0,
Hopper 5), temperature loss -log alpha * sg(log pi - |A|) with log alpha_0 = 0. Order: critic step -> Polyak ->
actor step -> alpha step, the actor and alpha losses evaluated with the pre-update critics, all on one minibatch.
Deviations:
  * lecun_uniform init with zero biases (Brax) rather than PyTorch's default;
  * batched envs and the loop's random warm-up (the official code acts with the policy from step 0 and
    trains from t >= 256: pass ``--learning-starts 256``).
"""
from __future__ import annotations

from typing import Any

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp

from jaxrl import ConfigError, checks
from jaxrl.agent import Agent, added_field, extra_field
from jaxrl.losses import (
    init_temperature,
    log_temperature_loss,
    polyak_update,
    quantile_huber_loss,
    target_or_online,
    td_target,
    with_target,
)
from jaxrl.networks import CriticEnsemble, GaussianPolicyHead, forward, reading, sample_tanh_gaussian, tanh_gaussian_act
from jaxrl.optim import OptimizerConfig, adam, grad_norm_metrics, gradient_step, network_state, trainable
from jaxrl.progress import Progress, progress_field
from jaxrl.types import Batch, EnvSpec, zeros_obs

static = lambda default: flax.struct.field(pytree_node=False, default=default)  # noqa: E731


@flax.struct.dataclass
class Config(OptimizerConfig):  # Adam's betas, eps, weight decay, clipping, lr schedule
    actor_hidden_sizes: tuple[int, ...] = static((256, 256))
    """hidden layer widths of the actor"""
    critic_hidden_sizes: tuple[int, ...] = static((512, 512, 512))
    """hidden layer widths of each quantile critic"""
    num_critics: int = static(5)
    """N: critics in the ensemble"""
    num_quantiles: int = static(25)
    """M: quantile atoms per critic"""
    drop_per_critic: int = 2
    """d: top atoms dropped per critic from the pooled, sorted target (K = N M - d N kept); a traced value, so a
    sweep can vmap over it (the dropped atoms are masked, not sliced off)"""
    batch_size: int = static(256)
    """transitions per gradient update"""
    n_step: int = static(1)
    """rewards summed per sampled transition before bootstrapping (n-step returns; 1 = the paper's one-step target)"""
    actor_lr: float = 3e-4
    """Adam learning rate of the actor"""
    critic_lr: float = 3e-4
    """Adam learning rate of the critics"""
    alpha_lr: float = 3e-4
    """Adam learning rate of log alpha"""
    gamma: float = 0.99
    """discount"""
    tau: float = 0.005
    """Polyak rate of the target critics"""
    init_alpha: float = 1.0
    """initial temperature alpha"""
    target_entropy: float | None = None
    """entropy target; None means -|A|"""
    target_networks: bool = added_field(True)
    """target critics moved by Polyak averaging (tau); False: the target atoms come from the online critics under
    stop_gradient, with no copy kept and no Polyak step"""


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


# ---------------------------------------------------------------------------------------------- losses


def truncated_target_atoms(state: State, batch: Batch, key, cfg: Config):
    """Targets y_k = r + gamma (1 - terminated)(z_(k) - alpha log pi(a'|s')) for all N M pooled atoms sorted
    ascending, [B, N M], and the [N M] mask that keeps the K = N M - d N smallest."""
    next_mean, next_log_std = state.actor.apply(state.actor_params, batch.next_obs)
    next_action, next_log_prob = sample_tanh_gaussian(key, next_mean, next_log_std)
    atoms, _ = forward(state.critic, target_or_online(state.target_critic_params, state.critic_params),
                       batch.next_obs, next_action, train=True, key=jax.random.fold_in(key, 1))  # [N, B, M]
    pooled = jnp.sort(jnp.moveaxis(atoms, 0, 1).reshape(atoms.shape[1], -1), axis=-1)  # [B, N M] ascending
    total = cfg.num_quantiles * cfg.num_critics
    keep = (jnp.arange(total) < total - cfg.drop_per_critic * cfg.num_critics).astype(pooled.dtype)
    next_value = pooled - jnp.exp(state.log_alpha) * next_log_prob[:, None]
    target = td_target(batch, next_value)
    return jax.lax.stop_gradient(target), keep


def critic_loss(critic_params, state: State, batch: Batch, key, cfg: Config, target_fn=truncated_target_atoms):
    """Quantile Huber loss (kappa = 1) of every critic's atoms against the target atoms and their mask,
    target_fn(...) (default: the truncated target set). Critic passes are training passes (dropout keys folded
    from ``key``); new statistics return as aux[NETWORK_STATE]."""
    target, keep = target_fn(state, batch, key, cfg)
    quantiles, statistics = forward(state.critic, critic_params, batch.obs, batch.action, train=True,
                                    key=jax.random.fold_in(key, 2))  # [N, B, M]
    loss = quantile_huber_loss(quantiles, target, target_mask=keep)
    target_mean = jnp.sum(target * keep) / (target.shape[0] * jnp.sum(keep))
    return loss, {"critic_loss": loss, "q_mean": jnp.mean(quantiles), "target_mean": target_mean,
                  **network_state(statistics)}


def actor_loss(actor_params, state: State, batch: Batch, key, cfg: Config):
    """E[alpha log pi(a|s) - mean over all N M atoms of theta(s, a)]."""
    (mean, log_std), statistics = forward(state.actor, actor_params, batch.obs, train=True,
                                          key=jax.random.fold_in(key, 1))
    action, log_prob = sample_tanh_gaussian(key, mean, log_std)
    atoms, _ = forward(state.critic, state.critic_params, batch.obs, action, train=True,
                       key=jax.random.fold_in(key, 2))
    q = jnp.mean(atoms, axis=(0, 2))
    loss = jnp.mean(jnp.exp(jax.lax.stop_gradient(state.log_alpha)) * log_prob - q)
    return loss, {"actor_loss": loss, "entropy": -jnp.mean(log_prob), "log_prob": log_prob,
                  **network_state(statistics)}


def alpha_loss(log_alpha, state: State, log_prob, cfg: Config):
    loss = log_temperature_loss(log_alpha, log_prob, state.target_entropy)
    return loss, {"alpha_loss": loss, "alpha": jnp.exp(log_alpha)}


# ------------------------------------------------------------------------------------- init / act / update


def optimizers(cfg: Config, progress: Progress | None = None):
    """Built from cfg at every call so learning rates may be traced values (sweeps vmap over them); ``progress``
    (``state.progress``) feeds ``lr_schedule``."""
    return (adam(cfg, cfg.actor_lr, progress), adam(cfg, cfg.critic_lr, progress),
            adam(cfg, cfg.alpha_lr, progress, weight_decay=False))


def check_config(cfg: Config) -> None:
    """Called by the loop on the host with concrete values before compiling (inside, numeric fields are traced)."""
    checks.positive_ints(cfg, "actor_hidden_sizes", "critic_hidden_sizes", "num_critics", "num_quantiles",
                         "batch_size", "n_step")
    checks.positive(cfg, "actor_lr", "critic_lr", "alpha_lr", "init_alpha")
    checks.unit_interval(cfg, "gamma", "tau")
    checks.finite_or_none(cfg, "target_entropy")
    checks.optimizer_fields(cfg)
    drop = checks.as_int(cfg.drop_per_critic)
    if drop is None or not 0 <= drop < cfg.num_quantiles:
        raise ConfigError(f"drop_per_critic must be an integer in [0, num_quantiles={cfg.num_quantiles}), "
                          f"got {checks.show(cfg.drop_per_critic)}")


def init(key, spec: EnvSpec, cfg: Config) -> State:
    actor = reading(spec.actor_obs, GaussianPolicyHead(cfg.actor_hidden_sizes, spec.action_size, "relu", -20.0, 2.0,
                                                       squash_log_std=False))
    critic = reading(spec.critic_obs, CriticEnsemble(cfg.critic_hidden_sizes, num_critics=cfg.num_critics,
                                                     output_size=cfg.num_quantiles))
    actor_key, critic_key = jax.random.split(key)
    obs, action = zeros_obs(spec, (1,)), jnp.zeros((1, spec.action_size))
    actor_params, critic_params = actor.init(actor_key, obs), critic.init(critic_key, obs, action)
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
    )


def act(state: State, obs, key, cfg: Config, deterministic: bool = False, carry=()):
    return tanh_gaussian_act(state.actor, state.actor_params, obs, key, deterministic), carry


def make_update(critic_loss_fn=critic_loss, actor_loss_fn=actor_loss, alpha_loss_fn=alpha_loss, target_fn=None):
    """An ``update`` optimising the given losses; ``target_fn`` replaces the critic loss's target atoms alone (same
    signature as ``truncated_target_atoms``)."""
    critic_loss_fn = with_target(critic_loss_fn, target_fn)

    def update(state: State, batch: Batch, key, cfg: Config):
        critic_key, actor_key = jax.random.split(key)
        actor_opt, critic_opt, alpha_opt = optimizers(cfg, state.progress)
        # Actor and alpha losses use the pre-update critics (tqc_pytorch): compute their gradients first.
        actor = gradient_step(actor_loss_fn, state.actor_params, state.actor_opt_state, actor_opt, state, batch,
                              actor_key, cfg)
        log_prob = actor.aux.pop("log_prob")
        alpha = gradient_step(alpha_loss_fn, state.log_alpha, state.alpha_opt_state, alpha_opt, state, log_prob, cfg)
        critic = gradient_step(critic_loss_fn, state.critic_params, state.critic_opt_state, critic_opt, state, batch,
                               critic_key, cfg)
        state = state.replace(
            critic_params=critic.params, critic_opt_state=critic.opt_state, actor_params=actor.params,
            actor_opt_state=actor.opt_state, log_alpha=alpha.params, alpha_opt_state=alpha.opt_state,
            target_critic_params=polyak_update(critic.params, state.target_critic_params, cfg.tau))
        return state, {**critic.aux, **actor.aux, **alpha.aux,
                       **grad_norm_metrics(critic=critic, actor=actor, alpha=alpha)}

    return update


update = make_update()

# The official values of Config's fields and where each is set (the docs' defaults table puts them beside ours).
_MAIN, _TRAINER, _NETS = ("tqc_pytorch 65114eb main.py", "tqc_pytorch 65114eb tqc/trainer.py",
                          "tqc_pytorch 65114eb tqc/structures.py")
OFFICIAL = {
    "actor_hidden_sizes": ((256, 256), f"{_NETS}: Actor"), "critic_hidden_sizes": ((512, 512, 512), f"{_NETS}: Critic"),
    "num_critics": (5, f"{_MAIN} --n_nets"), "num_quantiles": (25, f"{_MAIN} --n_quantiles"),
    "drop_per_critic": (2, f"{_MAIN} --top_quantiles_to_drop_per_net; README: HalfCheetah 0, Hopper 5, others 2"),
    "batch_size": (256, f"{_MAIN} --batch_size"), "actor_lr": (3e-4, _TRAINER), "critic_lr": (3e-4, _TRAINER),
    "alpha_lr": (3e-4, _TRAINER), "gamma": (0.99, f"{_MAIN} --discount"), "tau": (0.005, f"{_MAIN} --tau"),
    "init_alpha": (1.0, f"{_TRAINER}: log_alpha = 0"), "target_entropy": ("-|A|", f"{_MAIN}: -prod(action shape)"),
}

AGENT = Agent(name="tqc", Config=Config, init=init, act=act, update=update, check_config=check_config)
