"""FastTD3: TD3 with a C51 twin critic for massively parallel simulation (Seo et al. 2025, arXiv 2505.22642).

Reads top to bottom: Config -> State -> losses -> init / act / update -> AGENT.

What differs from TD3 (``agents/td3.py``), each as in the official code (younggyoseo/FastTD3 `fast_td3/fast_td3.py`,
`fast_td3/train.py`, `fast_td3/hyperparams.py`):
  * each critic is a C51 distribution over ``num_atoms`` atoms on [v_min, v_max], trained by cross-entropy to the
    projected target; with ``use_cdq`` both critics train on the one target distribution (of the two target
    critics' projections) whose expected value is smaller, and the actor maximises min(Q1, Q2); without it, each
    critic has its own target and the actor maximises their mean;
  * there is no target actor: the target action is the online actor's at s' plus clipped smoothing noise;
  * the target critics move by Polyak averaging (tau 0.1) after every critic update, the actor every
    ``policy_delay``-th (the official ``i % policy_frequency == 1`` of each step's updates);
  * exploration noise has one scale per env, drawn from U[std_min, std_max] at the start of each of its episodes
    (the acting ``carry``);
  * AdamW (weight decay 0.1) for both networks; the actor's last layer starts at N(0, init_scale^2);
  * critic widths 1024/512/256, actor 512/256/128 (the official ``hidden_dim`` halved layer by layer);
  * n-step returns (``n_step``; the official ``num_steps``) through the engine's sampler.
Defaults are the official ``BaseArgs``; ``AGENT.loop_defaults`` carries its loop values: 128 envs, 2 updates per
batched step, learning after 10 batched steps, acting with the policy from the first step (no uniform warm-up),
observation normalisation. The Playground values (1024 envs, gamma 0.97, v +-10, per-task noise) are the named
config ``fasttd3_playground``. Deviations: float32 instead of bf16 autocast; lecun-uniform hidden layers with
zero biases instead of PyTorch's default init; the batch is drawn uniformly from the whole buffer rather than
``batch_size / num_envs`` per env; exploratory actions are clipped to [-1, 1] (the engine's action range);
observations are normalised by statistics of the collected data only (the official normaliser also updates on
sampled batches).
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
from jaxrl.losses import polyak_update, target_or_online, with_target
from jaxrl.networks import MLP, CriticEnsemble, forward, reading
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
class Config(OptimizerConfig):  # Adam's betas, eps, weight decay (here 0.1), clipping, lr schedule
    critic_hidden_sizes: tuple[int, ...] = static((1024, 512, 256))
    """hidden layer widths of each critic (official critic_hidden_dim 1024, halved per layer)"""
    actor_hidden_sizes: tuple[int, ...] = static((512, 256, 128))
    """hidden layer widths of the actor (official actor_hidden_dim 512, halved per layer)"""
    batch_size: int = static(32768)
    """transitions per gradient update"""
    n_step: int = static(1)
    """rewards summed per sampled transition before bootstrapping (the official num_steps)"""
    num_atoms: int = static(101)
    """atoms of each C51 critic"""
    use_cdq: bool = static(True)
    """clipped double Q on the distributions (the official use_cdq)"""
    policy_delay: int = static(2)
    """critic updates per actor update (the official policy_frequency)"""
    num_critics: int = added_field(2)
    """C51 critics in the ensemble (with use_cdq, every critic trains on the projection of smallest expected value,
    and the actor follows their minimum)"""
    init_scale: float = static(0.01)
    """std of the actor's last-layer weights at init"""
    v_min: float = -250.0
    """lowest atom of the critics' support"""
    v_max: float = 250.0
    """highest atom of the critics' support"""
    actor_lr: float = 3e-4
    """AdamW learning rate of the actor"""
    critic_lr: float = 3e-4
    """AdamW learning rate of the twin critics"""
    weight_decay: float = 0.1
    """AdamW weight decay of both networks (the official 0.1; a swept number, so AdamW even at 0)"""
    gamma: float = 0.99
    """discount"""
    tau: float = 0.1
    """Polyak rate of the target critics, applied after every critic update"""
    policy_noise: float = 0.001
    """std of the target policy smoothing noise"""
    noise_clip: float = 0.5
    """the smoothing noise is clipped to [-noise_clip, noise_clip]"""
    std_min: float = 0.001
    """lowest per-env exploration noise std"""
    std_max: float = 0.4
    """highest per-env exploration noise std"""
    target_networks: bool = added_field(True)
    """target critics moved by Polyak averaging (tau); False: the target distributions come from the online
    critics under stop_gradient, with no copy kept and no Polyak step"""


class DeterministicActor(nn.Module):
    hidden_sizes: tuple[int, ...]
    action_size: int
    init_scale: float

    @nn.compact
    def __call__(self, obs):
        head_init = nn.initializers.normal(stddev=self.init_scale)
        return jnp.tanh(MLP(self.hidden_sizes, self.action_size, output_kernel_init=head_init)(obs))


@flax.struct.dataclass
class State:
    actor_params: Any
    critic_params: Any
    target_critic_params: Any
    actor_opt_state: Any
    critic_opt_state: Any
    num_updates: jax.Array  # critic updates so far: the actor moves when it is a multiple of policy_delay
    last_actor_metrics: dict[str, jax.Array]  # the last actor step's (DELAYED_METRICS), repeated in between
    actor: nn.Module = flax.struct.field(pytree_node=False)
    critic: nn.Module = flax.struct.field(pytree_node=False)
    progress: Progress | None = progress_field()  # where the run is, set by the loop for act/update
    extra: Any = extra_field()  # a plug-in's own learned state; the engine never touches it


# ---------------------------------------------------------------------------------------------- losses


def support(cfg: Config) -> jax.Array:
    return jnp.linspace(cfg.v_min, cfg.v_max, cfg.num_atoms)


def target_distributions(state: State, batch: Batch, key, cfg: Config):
    """[N, B, num_atoms]: each target critic's distribution at (s', clip(pi(s') + clip(eps, -c, c), -1, 1)), pi
    the online actor, projected onto the support from r + discount (1 - terminated) z; with ``use_cdq`` every row
    is the projection whose expected value is smallest, per sample (the last such on ties: with two critics, the
    official ``where(q1 < q2, q1_proj, q2_proj)``)."""
    action, _ = forward(state.actor, state.actor_params, batch.next_obs)
    noise = jnp.clip(cfg.policy_noise * jax.random.normal(key, action.shape), -cfg.noise_clip, cfg.noise_clip)
    next_action = jnp.clip(action + noise, -1.0, 1.0)
    next_logits, _ = forward(state.critic, target_or_online(state.target_critic_params, state.critic_params),
                             batch.next_obs, next_action, train=True, key=jax.random.fold_in(key, 1))
    projected = c51_target(batch, jax.nn.softmax(next_logits, axis=-1), support(cfg))
    if not cfg.use_cdq:
        return projected
    values = expected_value(projected, support(cfg))  # [N, B]
    smallest = values.shape[0] - 1 - jnp.argmin(values[::-1], axis=0)  # [B]
    chosen = jnp.take_along_axis(projected, smallest[None, :, None], axis=0)[0]
    return jnp.broadcast_to(chosen, projected.shape)


def critic_loss(critic_params, state: State, batch: Batch, key, cfg: Config, target_fn=target_distributions):
    """sum_j E[-sum_i m_ji log p_ji(s, a)]: each critic's cross-entropy to its target distribution m_j =
    target_fn(...)[j] (default: the official projections). Critic passes are training passes (dropout keys folded
    from ``key``); new statistics return as aux[NETWORK_STATE]."""
    target = target_fn(state, batch, key, cfg)
    logits, statistics = forward(state.critic, critic_params, batch.obs, batch.action, train=True,
                                 key=jax.random.fold_in(key, 2))
    loss = jnp.sum(jnp.mean(categorical_cross_entropy(target, logits), axis=-1))
    q = expected_value(jax.nn.softmax(logits, axis=-1), support(cfg))
    return loss, {"critic_loss": loss, "q_mean": jnp.mean(q),
                  "target_mean": jnp.mean(expected_value(target, support(cfg))), **network_state(statistics)}


def actor_loss(actor_params, state: State, batch: Batch, key, cfg: Config):
    """-E[min(Q1, Q2)(s, pi(s))] with ``use_cdq``, else -E[(Q1 + Q2) / 2]; Q the critics' expected values."""
    action, statistics = forward(state.actor, actor_params, batch.obs, train=True, key=jax.random.fold_in(key, 1))
    logits, _ = forward(state.critic, state.critic_params, batch.obs, action, train=True,
                        key=jax.random.fold_in(key, 2))
    q = expected_value(jax.nn.softmax(logits, axis=-1), support(cfg))
    loss = -jnp.mean(jnp.min(q, axis=0) if cfg.use_cdq else jnp.mean(q, axis=0))
    return loss, {"actor_loss": loss, **network_state(statistics)}


# ------------------------------------------------------------------------------------- init / act / update


def optimizers(cfg: Config, progress: Progress | None = None):
    """AdamW of both networks, built from cfg at every call so their rates may be traced (sweeps); ``progress``
    (``state.progress``) feeds ``lr_schedule``."""
    return adam(cfg, cfg.actor_lr, progress), adam(cfg, cfg.critic_lr, progress)


def check_config(cfg: Config) -> None:
    """Called by the loop on the host with concrete values before compiling (inside, numeric fields are traced)."""
    checks.positive_ints(cfg, "critic_hidden_sizes", "actor_hidden_sizes", "batch_size", "n_step", "num_atoms",
                         "policy_delay")
    if cfg.num_atoms < 2:
        raise ConfigError(f"num_atoms must be an integer >= 2 (the support needs two ends), got {cfg.num_atoms}")
    checks.bounds_ordered(cfg, "v_min", "v_max")
    checks.bounds_ordered(cfg, "std_min", "std_max")
    checks.positive(cfg, "actor_lr", "critic_lr", "init_scale")
    checks.unit_interval(cfg, "gamma", "tau")
    checks.non_negative(cfg, "policy_noise", "noise_clip", "std_min")
    checks.optimizer_fields(cfg)


def init(key, spec: EnvSpec, cfg: Config) -> State:
    actor = reading(spec.actor_obs, DeterministicActor(cfg.actor_hidden_sizes, spec.action_size, cfg.init_scale))
    critic = reading(spec.critic_obs, CriticEnsemble(cfg.critic_hidden_sizes, num_critics=cfg.num_critics,
                                                     output_size=cfg.num_atoms))
    actor_key, critic_key = jax.random.split(key)
    obs, action = zeros_obs(spec, (1,)), jnp.zeros((1, spec.action_size))
    actor_params = actor.init(actor_key, obs)
    critic_params = critic.init(critic_key, obs, action)
    actor_opt, critic_opt = optimizers(cfg)
    return State(
        actor_params=actor_params,
        critic_params=critic_params,
        target_critic_params=critic_params if cfg.target_networks else None,
        actor_opt_state=actor_opt.init(trainable(actor_params)),
        critic_opt_state=critic_opt.init(trainable(critic_params)),
        **delay_fields(DELAYED_METRICS),
        actor=actor,
        critic=critic,
    )


UNDRAWN = -1.0  # an env's noise scale before its episode's first action draws one


def init_carry(num_envs: int, spec: EnvSpec, cfg: Config):
    """Per-env exploration noise std; the loop resets an env's entry at the start of each of its episodes."""
    return jnp.full((num_envs,), UNDRAWN, jnp.float32)


def act(state: State, obs, key, cfg: Config, deterministic: bool = False, carry=()):
    action, _ = forward(state.actor, state.actor_params, obs)
    if deterministic:
        return action, carry
    scale_key, noise_key = jax.random.split(key)
    drawn = jax.random.uniform(scale_key, carry.shape, minval=cfg.std_min, maxval=cfg.std_max)
    noise_std = jnp.where(carry == UNDRAWN, drawn, carry)
    noise = noise_std[:, None] * jax.random.normal(noise_key, action.shape)
    return jnp.clip(action + noise, -1.0, 1.0), noise_std


DELAYED_METRICS = ("actor_loss", "grad_norm/actor")


def make_update(critic_loss_fn=critic_loss, actor_loss_fn=actor_loss, target_fn=None):
    """An ``update`` optimising the given losses: the critics every call, then the target critics; the actor every
    policy_delay-th call, against the updated critics. ``target_fn`` replaces the critic loss's target
    distributions alone (same signature as ``target_distributions``)."""
    critic_loss_fn = with_target(critic_loss_fn, target_fn)

    def update(state: State, batch: Batch, key, cfg: Config):
        critic_key, actor_key = jax.random.split(key)
        actor_opt, critic_opt = optimizers(cfg, state.progress)
        critic = gradient_step(critic_loss_fn, state.critic_params, state.critic_opt_state, critic_opt, state, batch,
                               critic_key, cfg)
        state = state.replace(critic_params=critic.params, critic_opt_state=critic.opt_state,
                              num_updates=state.num_updates + 1)

        def actor_step(state):
            actor = gradient_step(actor_loss_fn, state.actor_params, state.actor_opt_state, actor_opt, state, batch,
                                  actor_key, cfg)
            return state.replace(actor_params=actor.params, actor_opt_state=actor.opt_state), {
                "actor_loss": actor.aux["actor_loss"], **grad_norm_metrics(actor=actor)}

        state, delayed = delayed_step(official_delayed_turn(state.num_updates, cfg.policy_delay), actor_step, state)
        state = state.replace(target_critic_params=polyak_update(state.critic_params, state.target_critic_params,
                                                                 cfg.tau))
        return state, {**critic.aux, **grad_norm_metrics(critic=critic), **delayed}

    return update


update = make_update()

# The official values of Config's fields and where each is set (the docs' defaults table puts them beside ours).
_BASE, _NETS = "FastTD3 799624b hyperparams.py BaseArgs", "fast_td3.py halves hidden_dim per layer"
OFFICIAL = {
    "weight_decay": (0.1, f"{_BASE} (AdamW in train.py)"),
    "critic_hidden_sizes": ((1024, 512, 256), f"{_BASE}: critic_hidden_dim=1024; {_NETS}"),
    "actor_hidden_sizes": ((512, 256, 128), f"{_BASE}: actor_hidden_dim=512; {_NETS}"),
    "batch_size": (32768, _BASE), "n_step": (1, f"{_BASE}: num_steps"), "num_atoms": (101, _BASE),
    "use_cdq": (True, _BASE), "policy_delay": (2, f"{_BASE}: policy_frequency"),
    "num_critics": (2, "fast_td3.py Critic: qnet1, qnet2"), "init_scale": (0.01, _BASE),
    "v_min": (-250.0, f"{_BASE} (MuJoCoPlaygroundArgs: -10)"), "v_max": (250.0, f"{_BASE} (MuJoCoPlaygroundArgs: 10)"),
    "actor_lr": (3e-4, f"{_BASE}: actor_learning_rate"), "critic_lr": (3e-4, f"{_BASE}: critic_learning_rate"),
    "gamma": (0.99, f"{_BASE} (MuJoCoPlaygroundArgs: 0.97)"), "tau": (0.1, _BASE), "policy_noise": (0.001, _BASE),
    "noise_clip": (0.5, _BASE), "std_min": (0.001, _BASE), "std_max": (0.4, _BASE),
    "target_networks": (True, "train.py: qnet_target"),
}

# The official loop: 128 envs, num_updates=2 per batched step, learning_starts=10 batched steps, the policy (not
# uniform noise) acting from the start, obs_normalization=True.
AGENT = Agent(name="fasttd3", Config=Config, init=init, act=act, update=update, check_config=check_config,
              init_carry=init_carry,
              loop_defaults=MappingProxyType(dict(num_envs=128, updates_per_step=2 / 128, learning_starts=10 * 128,
                                                  warmup="policy", normalize_obs=True)))
