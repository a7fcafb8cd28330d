"""FastSAC: SAC with C51 critics for massively parallel simulation (arXiv 2512.01996).

Reads top to bottom: Config -> State -> losses -> init / act / update -> AGENT.

What differs from SAC (``agents/sac.py``), each as in the official code (amazon-far/holosoma
`src/holosoma/holosoma/agents/fast_sac/fast_sac.py`, `fast_sac_agent.py`, `config_values/algo.py`):
  * each critic is a C51 distribution over ``num_atoms`` atoms on [v_min, v_max]; critic j trains by cross-entropy
    on the projection of its own target critic's distribution at (s', a' ~ pi(.|s')), atoms shifted to
    r + discount (1 - terminated)(z - alpha log pi(a'|s')): no minimum over critics anywhere, and the actor
    maximises the critics' mean expected value;
  * the temperature steps with every critic update, on the next-state log pi of the critic's target;
  * the actor steps every ``policy_delay``-th update (the official ``i % policy_frequency == 1``), and the target
    critics move by Polyak averaging (tau 0.125) after every update;
  * networks: Dense -> LayerNorm (epsilon 1e-5, PyTorch's) -> SiLU blocks, critic 768/384/192, actor 512/256/128,
    the actor's mean and log-std heads start at zero (log std squashed into [-5, 0], so its first std is e^-2.5);
  * log pi's tanh correction is the official log(1 - tanh(u)^2 + 1e-6), not the exact value (``log_prob_epsilon``);
  * AdamW with betas (0.9, 0.95): weight decay 0.001 for actor and critics, and PyTorch's default 0.01 for the
    temperature (the official code passes none there); initial alpha 0.001, target entropy -ratio |A| with
    ratio 0 (a target of 0 nats).
Defaults are the official FastSAC values (gamma 0.97 and v +-20 included: its robots' settings);
``AGENT.loop_defaults`` carries its loop: 4096 envs, 8 updates per batched step, a replay of 1024 steps per env,
learning after 10 batched steps, acting with the policy from the first step, observation normalisation. The
Playground protocol is the named config ``fastsac_playground``. Deviations: float32 instead of bf16 autocast;
lecun-uniform hidden layers with zero biases instead of PyTorch's default init; batches drawn uniformly from the
whole buffer (the official code slices one sample env-major, so each update sees a subset of envs); observations
normalised by statistics of the collected data (the official normaliser updates on sampled batches); no symmetry
augmentation (holosoma's ``use_symmetry`` needs per-robot mirror maps); actions stay in [-1, 1] (holosoma rescales
them per joint; Playground's envs scale their own actions).
"""
from __future__ import annotations

from types import MappingProxyType
from typing import Any

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp

from jaxrl import ConfigError, checks
from jaxrl.agent import Agent, added_field, delay_fields, extra_field
from jaxrl.distributional import c51_target, categorical_cross_entropy, expected_value
from jaxrl.losses import init_temperature, polyak_update, target_or_online, temperature_loss, with_target
from jaxrl.networks import CriticEnsemble, GaussianPolicyHead, forward, reading, sample_tanh_gaussian, tanh_gaussian_act
from jaxrl.optim import (
    OptimizerConfig,
    adam,
    delayed_step,
    grad_norm_metrics,
    gradient_step,
    network_state,
    official_delayed_turn,
    trainable,
)
from jaxrl.progress import Progress, progress_field
from jaxrl.types import Batch, EnvSpec, zeros_obs

static = lambda default: flax.struct.field(pytree_node=False, default=default)  # noqa: E731


@flax.struct.dataclass
class Config(OptimizerConfig):  # Adam's betas (here 0.9, 0.95), eps, weight decay, clipping, lr schedule
    critic_hidden_sizes: tuple[int, ...] = static((768, 384, 192))
    """hidden layer widths of each critic (official critic_hidden_dim 768, halved per layer)"""
    actor_hidden_sizes: tuple[int, ...] = static((512, 256, 128))
    """hidden layer widths of the actor (official actor_hidden_dim 512, halved per layer)"""
    batch_size: int = static(8192)
    """transitions per gradient update"""
    n_step: int = static(1)
    """rewards summed per sampled transition before bootstrapping (the official num_steps)"""
    num_atoms: int = static(101)
    """atoms of each C51 critic"""
    num_critics: int = static(2)
    """critics (the official num_q_networks)"""
    policy_delay: int = static(4)
    """updates per actor update (the official policy_frequency)"""
    log_std_min: float = static(-5.0)
    """lower bound of the policy's log std"""
    log_std_max: float = static(0.0)
    """upper bound of the policy's log std"""
    log_prob_epsilon: float | None = added_field(1e-6, before=None)
    """log pi's tanh correction is log(1 - tanh(u)^2 + epsilon), the official form; None: the exact value (which
    falls 0.26 nats lower per saturated dimension at |u| = 7, 4.8 at 10, and so moves the temperature)"""
    layer_norm_epsilon: float = added_field(1e-5, before=1e-6)
    """LayerNorm's epsilon in every block (PyTorch's default, the official networks'; flax's is 1e-6)"""
    v_min: float = -20.0
    """lowest atom of the critics' support"""
    v_max: float = 20.0
    """highest atom of the critics' support"""
    actor_lr: float = 3e-4
    """AdamW learning rate of the actor"""
    critic_lr: float = 3e-4
    """AdamW learning rate of the critics"""
    alpha_lr: float = 3e-4
    """AdamW learning rate of log alpha"""
    weight_decay: float = 0.001
    """AdamW weight decay of the actor and the critics (a swept number, so AdamW even at 0)"""
    alpha_weight_decay: float = 0.01
    """AdamW weight decay of log alpha (PyTorch's default, which the official code leaves in place)"""
    adam_b2: float = 0.95
    """AdamW's second-moment decay for every optimizer (the official betas (0.9, 0.95))"""
    gamma: float = 0.97
    """discount"""
    tau: float = 0.125
    """Polyak rate of the target critics, applied after every update"""
    init_alpha: float = 0.001
    """initial temperature alpha"""
    target_entropy_ratio: float = 0.0
    """the entropy target is -target_entropy_ratio * |A| (0: a target of 0 nats)"""
    target_networks: bool = added_field(True)
    """target critics moved by Polyak averaging (tau); False: the target distributions come from the online
    critics under stop_gradient, with no copy kept and no Polyak step"""


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
    num_updates: jax.Array  # updates so far: the actor moves on every policy_delay-th
    last_actor_metrics: dict[str, jax.Array]  # the last actor step's (DELAYED_METRICS), repeated in between
    actor: nn.Module = flax.struct.field(pytree_node=False)
    critic: nn.Module = flax.struct.field(pytree_node=False)
    progress: Progress | None = progress_field()  # where the run is, set by the loop for act/update
    extra: Any = extra_field()  # a plug-in's own learned state; the engine never touches it


# ---------------------------------------------------------------------------------------------- losses


def support(cfg: Config) -> jax.Array:
    return jnp.linspace(cfg.v_min, cfg.v_max, cfg.num_atoms)


def soft_target_distributions(state: State, batch: Batch, key, cfg: Config):
    """([N, B, atoms] each target critic's distribution at (s', a' ~ pi(.|s')) projected from r + discount
    (1 - terminated)(z - alpha log pi(a'|s')), [B] log pi(a'|s')), no gradient through either."""
    mean, log_std = state.actor.apply(state.actor_params, batch.next_obs)
    next_action, next_log_prob = sample_tanh_gaussian(key, mean, log_std, cfg.log_prob_epsilon)
    next_logits, _ = forward(state.critic, target_or_online(state.target_critic_params, state.critic_params),
                             batch.next_obs, next_action, train=True, key=jax.random.fold_in(key, 1))  # [N, B, atoms]
    soft = jnp.exp(state.log_alpha) * next_log_prob
    return c51_target(batch, jax.nn.softmax(next_logits, axis=-1), support(cfg), next_shift=soft), next_log_prob


def critic_loss(critic_params, state: State, batch: Batch, key, cfg: Config, target_fn=soft_target_distributions):
    """sum_j E[-sum_i m_ji log p_ji(s, a)], m_j critic j's own soft C51 target (target_fn: the distributions and
    log pi(a'|s')). aux["next_log_prob"] feeds the temperature loss. Critic passes are training passes (dropout
    keys folded from ``key``); new statistics return as aux[NETWORK_STATE]."""
    target, next_log_prob = target_fn(state, batch, key, cfg)
    logits, statistics = forward(state.critic, critic_params, batch.obs, batch.action, train=True,
                                 key=jax.random.fold_in(key, 2))
    loss = jnp.sum(jnp.mean(categorical_cross_entropy(target, logits), axis=-1))
    q = expected_value(jax.nn.softmax(logits, axis=-1), support(cfg))
    return loss, {"critic_loss": loss, "q_mean": jnp.mean(q),
                  "target_mean": jnp.mean(expected_value(target, support(cfg))),
                  "next_log_prob": jax.lax.stop_gradient(next_log_prob), **network_state(statistics)}


def actor_loss(actor_params, state: State, batch: Batch, key, cfg: Config):
    """E[alpha log pi(a|s) - mean_j Q_j(s, a)], a reparameterised, Q_j critic j's expected value."""
    (mean, log_std), statistics = forward(state.actor, actor_params, batch.obs, train=True,
                                          key=jax.random.fold_in(key, 1))
    action, log_prob = sample_tanh_gaussian(key, mean, log_std, cfg.log_prob_epsilon)
    logits, _ = forward(state.critic, state.critic_params, batch.obs, action, train=True,
                        key=jax.random.fold_in(key, 2))
    q = jnp.mean(expected_value(jax.nn.softmax(logits, axis=-1), support(cfg)), axis=0)
    loss = jnp.mean(jnp.exp(jax.lax.stop_gradient(state.log_alpha)) * log_prob - q)
    return loss, {"actor_loss": loss, "entropy": -jnp.mean(log_prob), **network_state(statistics)}


def alpha_loss(log_alpha, state: State, next_log_prob, cfg: Config):
    """-alpha * sg(log pi(a'|s') + target entropy), averaged (the official form, on the critic target's samples)."""
    loss = temperature_loss(log_alpha, next_log_prob, state.target_entropy)
    return loss, {"alpha_loss": loss, "alpha": jnp.exp(log_alpha)}


# ------------------------------------------------------------------------------------- init / act / update


def optimizers(cfg: Config, progress: Progress | None = None):
    """(actor, critic, temperature) AdamW, built from cfg at every call so their rates may be traced (sweeps);
    ``progress`` (``state.progress``) feeds ``lr_schedule``."""
    return (adam(cfg, cfg.actor_lr, progress), adam(cfg, cfg.critic_lr, progress),
            adam(cfg, cfg.alpha_lr, progress, weight_decay=cfg.alpha_weight_decay))


def check_config(cfg: Config) -> None:
    """Called by the loop on the host with concrete values before compiling (inside, numeric fields are traced)."""
    checks.positive_ints(cfg, "critic_hidden_sizes", "actor_hidden_sizes", "batch_size", "n_step", "num_atoms",
                         "num_critics", "policy_delay")
    if cfg.num_atoms < 2:
        raise ConfigError(f"num_atoms must be an integer >= 2 (the support needs two ends), got {cfg.num_atoms}")
    checks.bounds_ordered(cfg, "log_std_min", "log_std_max")
    checks.bounds_ordered(cfg, "v_min", "v_max")
    checks.positive(cfg, "actor_lr", "critic_lr", "alpha_lr", "init_alpha")
    checks.non_negative(cfg, "alpha_weight_decay")
    checks.optimizer_fields(cfg)
    checks.unit_interval(cfg, "gamma", "tau")
    checks.finite_or_none(cfg, "target_entropy_ratio")


def init(key, spec: EnvSpec, cfg: Config) -> State:
    actor = reading(spec.actor_obs, GaussianPolicyHead(
        cfg.actor_hidden_sizes, spec.action_size, "silu", cfg.log_std_min, cfg.log_std_max, layer_norm=True,
        layer_norm_first=True, output_kernel_init=nn.initializers.zeros, layer_norm_epsilon=cfg.layer_norm_epsilon))
    critic = reading(spec.critic_obs, CriticEnsemble(cfg.critic_hidden_sizes, cfg.num_critics, cfg.num_atoms,
                                                     "silu", layer_norm=True, layer_norm_first=True,
                                                     layer_norm_epsilon=cfg.layer_norm_epsilon))
    actor_key, critic_key = jax.random.split(key)
    obs, action = zeros_obs(spec, (1,)), jnp.zeros((1, spec.action_size))
    actor_params = actor.init(actor_key, obs)
    critic_params = critic.init(critic_key, obs, action)
    log_alpha, target_entropy = init_temperature(cfg.init_alpha, -cfg.target_entropy_ratio * spec.action_size,
                                                 spec.action_size)
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
        **delay_fields(DELAYED_METRICS),
        actor=actor,
        critic=critic,
    )


def act(state: State, obs, key, cfg: Config, deterministic: bool = False, carry=()):
    return tanh_gaussian_act(state.actor, state.actor_params, obs, key, deterministic), carry


DELAYED_METRICS = ("actor_loss", "entropy", "grad_norm/actor")


def make_update(critic_loss_fn=critic_loss, actor_loss_fn=actor_loss, alpha_loss_fn=alpha_loss, target_fn=None):
    """An ``update``: critics, then temperature (on the critic target's next log pi), then every policy_delay-th
    call the actor (against the new critics and alpha), then the target critics. ``target_fn`` replaces the critic
    loss's target alone (same signature as ``soft_target_distributions``)."""
    critic_loss_fn = with_target(critic_loss_fn, target_fn)

    def update(state: State, batch: Batch, key, cfg: Config):
        critic_key, actor_key = jax.random.split(key)
        actor_opt, critic_opt, alpha_opt = optimizers(cfg, state.progress)
        critic = gradient_step(critic_loss_fn, state.critic_params, state.critic_opt_state, critic_opt, state, batch,
                               critic_key, cfg)
        next_log_prob = critic.aux.pop("next_log_prob")
        alpha = gradient_step(alpha_loss_fn, state.log_alpha, state.alpha_opt_state, alpha_opt, state, next_log_prob,
                              cfg)
        state = state.replace(critic_params=critic.params, critic_opt_state=critic.opt_state, log_alpha=alpha.params,
                              alpha_opt_state=alpha.opt_state, num_updates=state.num_updates + 1)

        def actor_step(state):
            actor = gradient_step(actor_loss_fn, state.actor_params, state.actor_opt_state, actor_opt, state, batch,
                                  actor_key, cfg)
            return state.replace(actor_params=actor.params, actor_opt_state=actor.opt_state), {
                "actor_loss": actor.aux["actor_loss"], "entropy": actor.aux["entropy"],
                **grad_norm_metrics(actor=actor)}

        state, delayed = delayed_step(official_delayed_turn(state.num_updates, cfg.policy_delay), actor_step, state)
        state = state.replace(target_critic_params=polyak_update(state.critic_params, state.target_critic_params,
                                                                 cfg.tau))
        return state, {**critic.aux, **alpha.aux, **grad_norm_metrics(critic=critic, alpha=alpha), **delayed}

    return update


update = make_update()

# The official values of Config's fields and where each is set (the docs' defaults table puts them beside ours).
_ALGO, _AGENT, _NETS = "holosoma fc600e7 config_values/algo.py fast_sac", "fast_sac_agent.py", "fast_sac.py"
OFFICIAL = {
    "adam_b1": (0.9, f"{_AGENT}: AdamW betas=(0.9, 0.95)"), "adam_b2": (0.95, f"{_AGENT}: AdamW betas=(0.9, 0.95)"),
    "weight_decay": (0.001, _ALGO),
    "critic_hidden_sizes": ((768, 384, 192), f"{_ALGO}: critic_hidden_dim=768, halved per layer in {_NETS}"),
    "actor_hidden_sizes": ((512, 256, 128), f"{_ALGO}: actor_hidden_dim=512, halved per layer in {_NETS}"),
    "batch_size": (8192, _ALGO), "n_step": (1, f"{_ALGO}: num_steps"), "num_atoms": (101, _ALGO),
    "num_critics": (2, f"{_ALGO}: num_q_networks"), "policy_delay": (4, f"{_ALGO}: policy_frequency"),
    "log_std_min": (-5.0, _ALGO), "log_std_max": (0.0, _ALGO),
    "log_prob_epsilon": (1e-6, f"{_NETS}: log(1 - tanh(u)^2 + 1e-6)"),
    "layer_norm_epsilon": (1e-5, f"{_NETS}: nn.LayerNorm's default eps"),
    "v_min": (-20.0, _ALGO), "v_max": (20.0, _ALGO), "actor_lr": (3e-4, f"{_ALGO}: actor_learning_rate"),
    "critic_lr": (3e-4, f"{_ALGO}: critic_learning_rate"), "alpha_lr": (3e-4, f"{_ALGO}: alpha_learning_rate"),
    "alpha_weight_decay": (0.01, f"{_AGENT}: none passed to alpha's AdamW, so PyTorch's default"),
    "gamma": (0.97, _ALGO), "tau": (0.125, _ALGO), "init_alpha": (0.001, f"{_ALGO}: alpha_init"),
    "target_entropy_ratio": (0.0, _ALGO), "target_networks": (True, f"{_AGENT}: qnet_target"),
}

# The official loop: 4096 envs, num_updates=8 per batched step, buffer_size=1024 per env, learning_starts=10 batched
# steps, the policy acting from the start, obs_normalization=True.
AGENT = Agent(name="fastsac", Config=Config, init=init, act=act, update=update, check_config=check_config,
              loop_defaults=MappingProxyType(dict(num_envs=4096, updates_per_step=8 / 4096, buffer_size=1024 * 4096,
                                                  learning_starts=10 * 4096, warmup="policy", normalize_obs=True)))
