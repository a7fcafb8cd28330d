"""SimbaV2: SAC with hyperspherical networks and a categorical critic (Lee et al. 2025, arXiv 2502.15280).

Reads top to bottom: Config -> State -> losses -> init / act / update -> AGENT.

Follows the official Flax code (dojeon-ai/SimbaV2 `scale_rl/agents/simbaV2/`, `configs/agent/simbaV2.yaml`): the
blocks of ``jaxrl/hyperspherical.py`` (actor: embedder h=128 + 1 LERP block + linear head with log std in [-10, 2];
critic: embedder h=512 on [s; a] + 2 blocks + 101-bin categorical head on [-5, 5]); every HyperDense kernel
projected back to unit column norm after each optimizer step (not the target critic, as in the official code). One
critic by default (the DMC configs); ``--simbav2.num-critics 2`` gives the clipped double-Q of the MuJoCo/Brax
configs, choosing per sample the target distribution whose expected value is smaller. Order per update: actor ->
temperature -> critic (target from the just-updated actor and alpha) -> Polyak (tau 0.005). Adam with the learning
rate decayed linearly 1e-4 -> 5e-5 over ``lr_decay_updates`` (official: all updates of the run; 1M = the DMC
protocol's 1M env steps at 1 update per env step), alpha_0 = 0.01, target entropy -0.5 |A|, gamma 0.99, batch 256.

Observation normalisation and reward scaling by the discounted-return statistics are loop features
(``--normalize-obs``, ``--scale-rewards``); ``AGENT.loop_defaults`` turns both on. For the DMC protocol (action
repeat 2, 2 updates per agent step) use ``--config simbav2_dmc``. Deviations: 16 batched envs by default
(official: 1); the final lr is 5e-5 (`configs/agent/simbaV2.yaml` of dojeon-ai/SimbaV2 14fafb2, the likely commit
behind the published CSVs, and of DAVIAN-Robotics/SimbaV2 86899c2; the paper appendix reportedly says 3e-4, and
issue DAVIAN-Robotics/SimbaV2#8 reports 1e-5 working), configurable as ``lr_final``.
"""
from __future__ import annotations

from types import MappingProxyType
from typing import Any

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp
import optax

from jaxrl import ConfigError, checks
from jaxrl.agent import Agent, added_field, extra_field
from jaxrl.distributional import c51_target
from jaxrl.hyperspherical import HyperCriticEnsemble, HyperTanhGaussianActor, project_hyper_kernels
from jaxrl.losses import init_temperature, polyak_update, target_or_online, temperature_loss, with_target
from jaxrl.networks import forward, reading, sample_tanh_gaussian, tanh_gaussian_act
from jaxrl.optim import OptimizerConfig, adam, grad_norm_metrics, gradient_step, network_state, trainable
from jaxrl.progress import Progress, progress_field
from jaxrl.types import Batch, EnvSpec, zeros_obs

static = lambda default: flax.struct.field(pytree_node=False, default=default)  # noqa: E731


@flax.struct.dataclass
class Config(OptimizerConfig):  # Adam's betas, eps, weight decay, clipping, lr schedule (times the decay below)
    actor_hidden_dim: int = static(128)
    """width h of the actor's sphere (its MLPs are expansion * h wide)"""
    actor_num_blocks: int = static(1)
    """residual LERP blocks of the actor"""
    critic_hidden_dim: int = static(512)
    """width h of each critic's sphere"""
    critic_num_blocks: int = static(2)
    """residual LERP blocks of each critic"""
    expansion: int = static(4)
    """inner width of a block's MLP, in multiples of h"""
    num_critics: int = static(1)
    """1 (DMC configs) or 2 (MuJoCo/Brax configs: clipped double-Q on expected values)"""
    num_bins: int = static(101)
    """atoms of the categorical critic on [-max_return, max_return]"""
    batch_size: int = static(256)
    """transitions per gradient update"""
    n_step: int = static(1)
    """rewards summed per sampled transition before bootstrapping (n-step returns; 1 = the paper's one-step target)"""
    lr_decay_updates: int = static(1_000_000)
    """updates over which the learning rate decays linearly from lr_init to lr_final"""
    c_shift: float = static(3.0)
    """constant appended to the input before the embedder's l2norm"""
    max_return: float = static(5.0)
    """G_max: the critic's support is [-G_max, G_max] (scaled returns; see --reward-scale-max-return)"""
    lr_init: float = 1e-4
    """initial Adam learning rate of actor, critic and alpha"""
    lr_final: float = 5e-5
    """learning rate after lr_decay_updates"""
    gamma: float = 0.99
    """discount"""
    tau: float = 0.005
    """Polyak rate of the target critic"""
    init_alpha: float = 0.01
    """initial temperature alpha"""
    target_entropy: float | None = None
    """entropy target; None means -0.5 |A|"""
    target_networks: bool = added_field(True)
    """a target critic moved by Polyak averaging (tau); False: the target distribution comes from the online
    critic under stop_gradient, with no copy kept and no Polyak step"""


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


def support(cfg: Config) -> jax.Array:
    return jnp.linspace(-cfg.max_return, cfg.max_return, cfg.num_bins)


def expected_values(log_probs, cfg: Config):
    """Q = sum_j p_j z_j over the last axis."""
    return jnp.sum(jnp.exp(log_probs) * support(cfg), axis=-1)


def actor_loss(actor_params, state: State, batch: Batch, key, cfg: Config):
    """E[alpha log pi(a|s) - Q(s, a)], Q the critic's expected value (the min over two critics with CDQ)."""
    (mean, log_std), statistics = forward(state.actor, actor_params, batch.obs, train=True,
                                          key=jax.random.fold_in(key, 1))
    action, log_prob = sample_tanh_gaussian(key, mean, log_std)
    log_probs, _ = forward(state.critic, state.critic_params, batch.obs, action, train=True,
                           key=jax.random.fold_in(key, 2))
    q = jnp.min(expected_values(log_probs, cfg), axis=0)
    loss = jnp.mean(jnp.exp(jax.lax.stop_gradient(state.log_alpha)) * log_prob - q)
    return loss, {"actor_loss": loss, "entropy": -jnp.mean(log_prob), "log_prob": log_prob,
                  **network_state(statistics)}


def alpha_loss(log_alpha, state: State, log_prob, cfg: Config):
    """alpha * (H - H_target), H = -E log pi (the official form), w.r.t. log alpha."""
    loss = temperature_loss(log_alpha, log_prob, state.target_entropy)
    return loss, {"alpha_loss": loss, "alpha": jnp.exp(log_alpha)}


def target_distribution(state: State, batch: Batch, key, cfg: Config):
    """[B, num_bins] target: the target critic's distribution at (s', a' ~ pi), atoms shifted to
    r + gamma (1 - terminated)(z_j - alpha log pi(a'|s')) (gamma^m for n-step transitions),
    projected back onto the support (C51). Target critic: the online one under stop_gradient with
    ``target_networks`` off."""
    mean, log_std = state.actor.apply(state.actor_params, batch.next_obs)
    next_action, next_log_prob = sample_tanh_gaussian(key, mean, log_std)
    next_log_probs, _ = forward(state.critic, target_or_online(state.target_critic_params, state.critic_params),
                                batch.next_obs, next_action, train=True, key=jax.random.fold_in(key, 1))  # [N, B, bins]
    # With two critics, per sample the distribution whose expected value is smaller (clipped double-Q).
    chosen = jnp.argmin(expected_values(next_log_probs, cfg), axis=0)  # [B]
    next_probs = jnp.exp(jnp.take_along_axis(next_log_probs, chosen[None, :, None], axis=0)[0])
    return c51_target(batch, next_probs, support(cfg), next_shift=jnp.exp(state.log_alpha) * next_log_prob)


def critic_loss(critic_params, state: State, batch: Batch, key, cfg: Config, target_fn=target_distribution):
    """Cross-entropy -sum_j m_j log p_j(s, a), batch mean, summed over the critics (same target m = target_fn(...)
    for each). Critic passes are training passes (dropout keys folded from ``key``); new statistics return as
    aux[NETWORK_STATE]."""
    target = target_fn(state, batch, key, cfg)
    log_probs, statistics = forward(state.critic, critic_params, batch.obs, batch.action, train=True,
                                    key=jax.random.fold_in(key, 2))
    loss = jnp.sum(jnp.mean(-jnp.sum(target[None] * log_probs, axis=-1), axis=-1))
    q = expected_values(log_probs, cfg)
    return loss, {"critic_loss": loss, "q_mean": jnp.mean(q),
                  "target_mean": jnp.mean(jnp.sum(target * support(cfg), axis=-1)), **network_state(statistics)}


# ------------------------------------------------------------------------------------- init / act / update


def optimizers(cfg: Config, progress: Progress | None = None):
    """(actor, critic, temperature) Adam on the official linear decay from lr_init to lr_final (times
    ``lr_schedule``'s factor of ``progress``, ``state.progress``; constant by default)."""
    schedule = optax.linear_schedule(cfg.lr_init, cfg.lr_final, cfg.lr_decay_updates)
    return adam(cfg, schedule, progress), adam(cfg, schedule, progress), adam(cfg, schedule, progress,
                                                                             weight_decay=False)


def optimizer(cfg: Config):
    """The actor's and critic's optimiser: this file's name for it before ``optimizers``, kept for plug-ins."""
    return optimizers(cfg)[0]


def check_config(cfg: Config) -> None:
    """Called by the loop on the host with concrete values before compiling (inside, numeric fields are traced)."""
    checks.positive_ints(cfg, "actor_hidden_dim", "actor_num_blocks", "critic_hidden_dim", "critic_num_blocks",
                         "expansion", "num_critics", "num_bins", "batch_size", "n_step", "lr_decay_updates")
    if cfg.num_critics not in (1, 2):
        raise ConfigError(f"num_critics={cfg.num_critics} must be 1 (DMC) or 2 (clipped double-Q)")
    if cfg.num_bins < 2:
        raise ConfigError(f"num_bins must be an integer >= 2 (the critic's support needs two ends), got {cfg.num_bins}")
    checks.positive(cfg, "c_shift", "max_return", "lr_init", "lr_final", "init_alpha")
    checks.unit_interval(cfg, "gamma", "tau")
    checks.finite_or_none(cfg, "target_entropy")
    checks.optimizer_fields(cfg)


def init(key, spec: EnvSpec, cfg: Config) -> State:
    actor = reading(spec.actor_obs, HyperTanhGaussianActor(cfg.actor_hidden_dim, cfg.actor_num_blocks,
                                                           spec.action_size, cfg.c_shift, cfg.expansion))
    critic = reading(spec.critic_obs, HyperCriticEnsemble(cfg.critic_hidden_dim, cfg.critic_num_blocks,
                                                          cfg.num_critics, cfg.num_bins, cfg.c_shift, cfg.expansion))
    actor_key, critic_key = jax.random.split(key)
    obs, action = zeros_obs(spec, (1,)), jnp.zeros((1, spec.action_size))
    actor_params = project_hyper_kernels(actor.init(actor_key, obs))
    critic_params = project_hyper_kernels(critic.init(critic_key, obs, action))
    target = -0.5 * spec.action_size if cfg.target_entropy is None else cfg.target_entropy
    log_alpha, target_entropy = init_temperature(cfg.init_alpha, target, spec.action_size)
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
    """A tanh-Gaussian sample (sampling temperature 1) or, deterministic, tanh(mean) (temperature 0)."""
    return tanh_gaussian_act(state.actor, state.actor_params, obs, key, deterministic), carry


def make_update(critic_loss_fn=critic_loss, actor_loss_fn=actor_loss, alpha_loss_fn=alpha_loss, target_fn=None):
    """An ``update``: actor and temperature on the pre-update critic, then the critic and its target;
    ``target_fn`` replaces the critic loss's target distribution alone (same signature as
    ``target_distribution``)."""
    critic_loss_fn = with_target(critic_loss_fn, target_fn)

    def update(state: State, batch: Batch, key, cfg: Config):
        actor_key, critic_key = jax.random.split(key)
        actor_opt, critic_opt, alpha_opt = optimizers(cfg, state.progress)
        actor = gradient_step(actor_loss_fn, state.actor_params, state.actor_opt_state, actor_opt, state, batch,
                              actor_key, cfg)
        log_prob = actor.aux.pop("log_prob")
        alpha = gradient_step(alpha_loss_fn, state.log_alpha, state.alpha_opt_state, alpha_opt, state, log_prob, cfg)
        state = state.replace(actor_params=project_hyper_kernels(actor.params), actor_opt_state=actor.opt_state,
                              log_alpha=alpha.params, alpha_opt_state=alpha.opt_state)

        critic = gradient_step(critic_loss_fn, state.critic_params, state.critic_opt_state, critic_opt, state, batch,
                               critic_key, cfg)
        critic_params = project_hyper_kernels(critic.params)
        state = state.replace(critic_params=critic_params, critic_opt_state=critic.opt_state,
                              target_critic_params=polyak_update(critic_params, state.target_critic_params, cfg.tau))
        return state, {**critic.aux, **actor.aux, **alpha.aux,
                       **grad_norm_metrics(critic=critic, actor=actor, alpha=alpha)}

    return update


update = make_update()

# The official values of Config's fields and where each is set (the docs' defaults table puts them beside ours).
_AGENT_YAML, _ONLINE = "dojeon-ai/SimbaV2 14fafb2 configs/agent/simbaV2.yaml", "configs/online_rl.yaml"
OFFICIAL = {
    "actor_hidden_dim": (128, _AGENT_YAML), "actor_num_blocks": (1, _AGENT_YAML),
    "critic_hidden_dim": (512, _AGENT_YAML), "critic_num_blocks": (2, _AGENT_YAML),
    "expansion": (4, "scale_rl/agents/simbaV2/simbaV2_layer.py HyperLERPBlock"),
    "num_critics": (1, f"{_AGENT_YAML}: critic_use_cdq = env.episodic, false on DMC (MuJoCo: 2)"),
    "num_bins": (101, f"{_AGENT_YAML}: critic_num_bins"),
    "batch_size": (256, "configs/buffer/numpy_uniform.yaml: sample_batch_size"), "n_step": (1, _ONLINE),
    "lr_decay_updates": (1_000_000, f"{_AGENT_YAML}: learning_rate_decay_step = all updates of the run (DMC: 1M)"),
    "c_shift": (3.0, f"{_AGENT_YAML}: actor_c_shift, critic_c_shift"),
    "max_return": (5.0, f"{_AGENT_YAML}: normalized_g_max"),
    "lr_init": (1e-4, f"{_AGENT_YAML}: learning_rate_init"), "lr_final": (5e-5, f"{_AGENT_YAML}: learning_rate_end"),
    "gamma": (0.99, f"{_ONLINE}: TD-MPC2's heuristic, 0.99 at DMC's 500 agent steps per episode"),
    "tau": (0.005, f"{_AGENT_YAML}: target_tau"), "init_alpha": (0.01, f"{_AGENT_YAML}: temp_initial_value"),
    "target_entropy": ("-0.5|A|", f"{_AGENT_YAML}: temp_target_entropy_coef"),
}

AGENT = Agent(name="simbav2", Config=Config, init=init, act=act, update=update, check_config=check_config,
              loop_defaults=MappingProxyType(dict(normalize_obs=True, scale_rewards=True)))
