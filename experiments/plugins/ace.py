"""ACE (Ji et al., ICML 2024, arXiv 2402.14528): SAC with a causality-aware entropy and a dormancy-guided soft reset.

    jaxrl train --agent experiments.plugins.ace:AGENT --env dmc/CartpoleSwingup
    jaxrl train --agent experiments.plugins.ace:AGENT --env toy/PointMass --ace.causal-interval 2000

Three pieces on SAC, as the official code (jity16/ACE-Off-Policy-Actor-Critic-with-Causality-Aware-Entropy-
Regularization at 6de5308; docs/sources.md) has them:

* **Causal weights** w (one per action dimension, sum |A|): how much each action dimension drives the reward,
  estimated from the newest ``causal_sample_size`` transitions every ``causal_interval`` env steps (w = 1 before the
  first estimate). The engine's ``refresh`` hook runs the estimate inside the compiled program with the buffer's
  window read (``jaxrl.buffer.recent``): no host step, and a resumed run re-estimates at the same env steps.
* **Causality-aware entropy**: log pi_w(a|s) = sum_i w_i l_i, l_i the i-th dimension's tanh-Gaussian log-density
  with its own Jacobian term, replaces log pi in the critic's target, the actor loss and the temperature loss
  (not in acting: sampling is SAC's).
* **Gradient dormancy and soft reset**: after each actor step, the share of the actor's neurons whose incoming
  gradient norm is below ``dormant_threshold`` x their layer's mean; every ``reset_interval`` updates (after
  ``reset_after``) actor, critics and target critics are blended with freshly initialised networks,
  theta <- eta theta + (1 - eta) phi, eta = clip(1 - dormant ratio, reset_min, reset_max), and the actor's and
  critics' Adam states are cleared (the temperature's is kept). Since eta <= reset_max < 1 a reset happens at every
  check: the dormancy sets its strength only (the code's ``if factor < 1`` always holds).

Hooks: a ``State`` subclass (weights, dormancy), ``refresh``/``refresh_interval`` (the causal estimate, reading the
buffer), ``state.progress`` (the actor's turn and the reset schedule count the engine's updates), SAC's losses with
``target_fn`` and ``actor_loss_fn`` swapped.

What this file decides:
  * **The estimator is a jittable stand-in for DirectLiNGAM** (our choice): the ridge regression of
    r on [s, a] over the window (centred, raw units as the code feeds DirectLiNGAM; ``causal_ridge`` x I added to
    the covariance), its action block beta, w = |A| softmax(beta) (signed, as the code; ``causal_abs`` takes |beta|).
    It equals DirectLiNGAM's reward row where DirectLiNGAM orders the reward last and its adaptive lasso keeps every
    action; ``python bench/ace_causal_weights.py`` compares the two on recorded replay samples (docs/plugins/ace.md).
  * The dormancy counts the actor's output layer (mean and log std, one Dense of 2|A| units here) as one layer; the
    code has two heads, each with its own mean.
  * A reset is checked on the index of the current update, counted from 0, as the code's ``update_parameters``
    reads its ``updates`` before the training loop increments it: the first reset is at update 100000, whose
    actor step (100000 is a multiple of the policy delay) gives the dormancy it reads.
  * The temperature's loss is the code's log-alpha form, -log alpha * sg(log pi + target entropy)
    (``model/algorithm.py``; ``log_alpha_loss=False``: SAC's alpha form, alpha times the gradient).
  * Networks: the code's 3 x 1024 with ELU after the first layer and ReLU after the others, Xavier-uniform init;
    here ReLU after every layer and SAC's lecun-uniform init (the fresh networks of a reset are orthogonal with zero
    biases, as the code's). Log std clipped to [-20, 2] as the code (SAC here squashes into [-5, 2]).
  * ``reset_rule="causal"`` is the code's ``causal_reset`` (eta from the spread of w); ``dormant_reset`` and
    ``causal_dormant_reset`` crash in the code and are not ported.
"""
from __future__ import annotations

import dataclasses

import flax.struct
import jax
import jax.numpy as jnp

from agents import sac
from jaxrl import ConfigError, checks
from jaxrl import buffer as buffer_lib
from jaxrl.agent import Agent, added_field, delay_fields
from jaxrl.losses import polyak_update, target_or_online, td_target, with_target
from jaxrl.networks import (
    GaussianPolicyHead,
    orthogonal_init,
    reading,
    tanh_gaussian_act,
    tanh_gaussian_log_prob_per_dim,
)
from jaxrl.optim import delayed_step, grad_norm_metrics, gradient_step
from jaxrl.types import Batch, EnvSpec

static = lambda default: flax.struct.field(pytree_node=False, default=default)  # noqa: E731


@flax.struct.dataclass
class Config(sac.Config):
    hidden_sizes: tuple[int, ...] = static((1024, 1024, 1024))
    """hidden layer widths of the actor and of each critic (the code's 3 x 1024)"""
    batch_size: int = static(512)
    """transitions per gradient update"""
    policy_delay: int = static(2)
    """the actor, the temperature and the targets' Polyak step move every policy_delay-th update (the code's
    target_update_interval 2), at updates 0, 2, 4, ..."""
    log_std_min: float = static(-20.0)
    """lower bound of the policy's log std (clipped, as the code)"""
    log_prob_epsilon: float = static(1e-6)
    """the code's log(1 - tanh(u)^2 + epsilon) in each dimension's density"""
    causal_interval: int = static(10_000)
    """env steps between causal-weight estimates (the code's causal_sample_interval)"""
    causal_sample_size: int = static(10_000)
    """the newest transitions each estimate fits on (at most the buffer's capacity; no estimate before the buffer
    holds this many)"""
    causal_ridge: float = 1e-6
    """ridge added to the window's covariance of [s, a] (the estimator's, not the code's: it keeps constant state
    dimensions solvable)"""
    causal_abs: bool = static(False)
    """softmax over |beta| instead of the signed beta (the code: signed)"""
    reset_rule: str = static("dormancy")
    """what sets the reset's strength eta: "dormancy" (the code's default ``reset``) or "causal" (``causal_reset``:
    eta = clip(1.5 - exp(-8 (max w - min w)), reset_min, reset_max))"""
    log_alpha_loss: bool = added_field(True, before=False)
    """the temperature's loss in log-alpha form, as the code (False: SAC's alpha form)"""
    reset_interval: int = static(100_000)
    """gradient updates between soft resets (0: never)"""
    reset_after: int = static(5_000)
    """no reset until more than this many updates are done"""
    dormant_threshold: float = 0.05
    """a neuron is dormant when its gradient norm is below this fraction of its layer's mean"""
    reset_min: float = 0.2
    """lower clip of eta, the share of the old weights a reset keeps"""
    reset_max: float = 0.9
    """upper clip of eta"""


@flax.struct.dataclass
class State(sac.State):
    causal_weights: jax.Array = flax.struct.field(default=None, kw_only=True)  # [|A|], sum |A|; ones before estimating
    dormant_ratio: jax.Array = flax.struct.field(default=None, kw_only=True)  # the last actor step's dormant share


# ----------------------------------------------------------------------------------------- causal weights


def causal_weights_from(obs, action, reward, valid, ridge, use_abs: bool = False):
    """w = |A| softmax(beta), beta the action block of the ridge regression of r on [s, a] (centred) over the
    transitions where ``valid``: the reward row of DirectLiNGAM's adjacency when the reward is a sink."""
    features = jnp.concatenate([*jax.tree.leaves(obs), action], axis=-1)
    mask = valid.astype(features.dtype)
    count = jnp.maximum(jnp.sum(mask), 1.0)
    centred = features - jnp.sum(mask[:, None] * features, axis=0) / count
    centred_reward = reward - jnp.sum(mask * reward) / count
    covariance = (mask[:, None] * centred).T @ centred / count
    moment = (mask[:, None] * centred).T @ centred_reward / count
    coefficients = jnp.linalg.solve(covariance + ridge * jnp.eye(features.shape[-1]), moment)
    beta = coefficients[-action.shape[-1]:]
    beta = jnp.abs(beta) if use_abs else beta
    return action.shape[-1] * jax.nn.softmax(beta)


def refresh_causal_weights(state: State, buffer, key, cfg: Config) -> State:
    """The engine's ``refresh``: re-estimate w from the newest transitions, keep the old w until the buffer holds
    ``causal_sample_size`` of them (the code's ``len(local_buffer) >= causal_sample_size``)."""
    capacity = buffer.reward.shape[0] * buffer.reward.shape[1]
    recent = buffer_lib.recent(buffer, min(cfg.causal_sample_size, capacity))
    estimate = causal_weights_from(recent.obs, recent.action, recent.reward, recent.valid, cfg.causal_ridge,
                                   cfg.causal_abs)
    enough = jnp.all(recent.valid)
    return state.replace(causal_weights=jnp.where(enough, estimate, state.causal_weights))


def causal_refresh_interval(cfg: Config) -> int:
    return cfg.causal_interval


# ---------------------------------------------------------------------------------------------- losses


def causal_log_prob(u, mean, log_std, weights, epsilon=1e-6):
    """log pi_w = sum_i w_i [log N(u_i; mean_i, std_i) - log(1 - tanh(u_i)^2 + epsilon)] (actions in [-1, 1], so
    the code's action scale c_i is 1)."""
    return jnp.sum(weights * tanh_gaussian_log_prob_per_dim(u, mean, log_std, epsilon), axis=-1)


def sample_causal(state: State, actor_params, obs, key, cfg: Config):
    """A reparameterised tanh-Gaussian action and its causally weighted log-probability."""
    mean, log_std = state.actor.apply(actor_params, obs)
    u = mean + jnp.exp(log_std) * jax.random.normal(key, mean.shape, mean.dtype)
    return jnp.tanh(u), causal_log_prob(u, mean, log_std, state.causal_weights, cfg.log_prob_epsilon)


def causal_soft_target(state: State, batch: Batch, key, cfg: Config):
    """y = r + gamma (1 - terminated)(min_j Qbar_j(s', a') - alpha log pi_w(a'|s')), a' ~ pi(.|s'), no gradient."""
    next_action, next_log_prob = sample_causal(state, state.actor_params, batch.next_obs, key, cfg)
    next_q = state.critic.apply(target_or_online(state.target_critic_params, state.critic_params), batch.next_obs,
                                next_action)[..., 0]
    next_value = jnp.min(next_q, axis=0) - jnp.exp(state.log_alpha) * next_log_prob
    return jax.lax.stop_gradient(td_target(batch, next_value))


def causal_actor_loss(actor_params, state: State, batch: Batch, key, cfg: Config):
    """E[alpha log pi_w(a|s) - min_j Q_j(s, a)]; aux["log_prob"] (weighted) feeds SAC's temperature loss."""
    action, log_prob = sample_causal(state, actor_params, batch.obs, key, cfg)
    q = state.critic.apply(state.critic_params, batch.obs, action)[..., 0]
    alpha = jnp.exp(jax.lax.stop_gradient(state.log_alpha))
    loss = jnp.mean(alpha * log_prob - jnp.min(q, axis=0))
    return loss, {"actor_loss": loss, "entropy": -jnp.mean(log_prob), "log_prob": log_prob}


# ------------------------------------------------------------------------------------ dormancy and reset


def _kernels(tree):
    return [leaf for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0] if path[-1].key == "kernel"]


def dormant_ratio(grads, threshold):
    """Dormant neurons over all neurons of every Dense layer: neuron k of a layer is dormant when the norm of its
    incoming weights' gradient (column k of a Flax kernel) is below ``threshold`` x the layer's mean norm."""
    dormant, total = 0.0, 0
    for kernel in _kernels(grads):
        norms = jnp.linalg.norm(kernel, axis=-2)  # [..., out]; a critic ensemble's leading axis counts its critics
        layer_mean = jnp.mean(norms, axis=-1, keepdims=True)
        dormant = dormant + jnp.sum(norms < threshold * layer_mean)
        total += norms.size
    return dormant / total


def fresh_params(params, key):
    """The code's re-initialisation of a reset: orthogonal kernels (each critic's own), zero biases, unit scales.
    The kernels come from ``networks.orthogonal_init`` (Gram-Schmidt, no LAPACK QR inside the program)."""
    leaves, treedef = jax.tree_util.tree_flatten_with_path(params)
    keys = jax.random.split(key, len(leaves))
    orthogonal = orthogonal_init()

    def fresh(path, leaf, key):
        name = path[-1].key
        if name == "kernel":
            if leaf.ndim == 2:
                return orthogonal(key, leaf.shape, leaf.dtype)
            stacked = jax.random.split(key, leaf.shape[0])
            return jax.vmap(lambda k: orthogonal(k, leaf.shape[1:], leaf.dtype))(stacked)
        return jnp.ones_like(leaf) if name == "scale" else jnp.zeros_like(leaf)

    return jax.tree_util.tree_unflatten(treedef, [fresh(p, leaf, k) for (p, leaf), k in zip(leaves, keys, strict=True)])


def blend(params, fresh, keep):
    """theta <- keep theta + (1 - keep) phi, every leaf."""
    return jax.tree.map(lambda old, new: keep * old + (1.0 - keep) * new, params, fresh)


def reset_strength(state: State, cfg: Config):
    """eta, the share of the old weights a reset keeps."""
    if cfg.reset_rule == "causal":
        spread = jnp.max(state.causal_weights) - jnp.min(state.causal_weights)
        raw = 1.0 - (jnp.exp(-8.0 * spread) - 0.5)
    else:
        raw = 1.0 - state.dormant_ratio
    return jnp.clip(raw, cfg.reset_min, cfg.reset_max)


def soft_reset(state: State, key, cfg: Config) -> State:
    """Blend actor, critics and target critics (each with its own fresh network) and clear their Adam states."""
    actor_key, critic_key, target_key = jax.random.split(key, 3)
    keep = reset_strength(state, cfg)
    actor_params = blend(state.actor_params, fresh_params(state.actor_params, actor_key), keep)
    critic_params = blend(state.critic_params, fresh_params(state.critic_params, critic_key), keep)
    target_params = None if state.target_critic_params is None else blend(  # no copy kept: nothing to blend
        state.target_critic_params, fresh_params(state.target_critic_params, target_key), keep)
    actor_opt, critic_opt, _ = sac.optimizers(cfg)
    return state.replace(actor_params=actor_params, critic_params=critic_params, target_critic_params=target_params,
                         actor_opt_state=actor_opt.init(actor_params), critic_opt_state=critic_opt.init(critic_params))


def reset_due(update_index, cfg: Config):
    """The code's check, ``updates % reset_interval == 0 and updates > 5000`` on the current update's index."""
    if not cfg.reset_interval:
        return jnp.bool_(False)
    return (update_index % cfg.reset_interval == 0) & (update_index > cfg.reset_after)


# ------------------------------------------------------------------------------------- init / act / update

DELAYED_METRICS = ("actor_loss", "entropy", "alpha_loss", "alpha", "dormant_ratio", "grad_norm/actor",
                   "grad_norm/alpha")


def check_config(cfg: Config) -> None:
    sac.check_config(cfg)
    checks.positive_ints(cfg, "causal_interval", "causal_sample_size")
    for name in ("reset_interval", "reset_after"):
        checks.require(cfg, name, lambda x: x >= 0 and x == int(x), "a whole number >= 0")
    checks.positive(cfg, "dormant_threshold")
    checks.require(cfg, "causal_ridge", lambda x: x >= 0, "a ridge >= 0")
    checks.unit_interval(cfg, "reset_min", "reset_max")
    checks.bounds_ordered(cfg, "reset_min", "reset_max")
    if cfg.reset_rule not in ("dormancy", "causal"):
        raise ConfigError(f"reset_rule={cfg.reset_rule!r}: choose 'dormancy' or 'causal'")


def init(key, spec: EnvSpec, cfg: Config) -> State:
    """SAC's networks and optimisers, the actor's log std clipped instead of squashed (same parameters), w = 1."""
    base = sac.init(key, spec, cfg)
    actor = reading(spec.actor_obs, GaussianPolicyHead(cfg.hidden_sizes, spec.action_size, "relu", cfg.log_std_min,
                                                       cfg.log_std_max, squash_log_std=False))
    fields = {f.name: getattr(base, f.name) for f in dataclasses.fields(base)}
    return State(**{**fields, "actor": actor, "num_updates": None,
                    "last_actor_metrics": delay_fields(DELAYED_METRICS)["last_actor_metrics"]},
                 causal_weights=jnp.ones((spec.action_size,), jnp.float32), dormant_ratio=jnp.zeros((), jnp.float32))


def act(state: State, obs, key, cfg: Config, deterministic: bool = False, carry=()):
    """SAC's: the weights change the density, not the sampling."""
    return tanh_gaussian_act(state.actor, state.actor_params, obs, key, deterministic), carry


def make_update(critic_loss_fn=sac.critic_loss, actor_loss_fn=causal_actor_loss, alpha_loss_fn=None,
                target_fn=causal_soft_target):
    """ACE's update: the critic every update; at updates 0, d, 2d, ... (d = policy_delay) the actor, the
    temperature and the targets' Polyak step; then, on the reset schedule, the soft reset. ``alpha_loss_fn``
    None: the form ``cfg.log_alpha_loss`` chooses."""
    critic_loss_fn = with_target(critic_loss_fn, target_fn)

    def update(state: State, batch: Batch, key, cfg: Config):
        if state.progress is None:
            raise ConfigError("ACE's delays and resets count the engine's updates: its update needs state.progress, "
                              "which the training loop sets (jaxrl.progress.attach to call update by hand)")
        critic_key, actor_key, reset_key = jax.random.split(key, 3)
        actor_opt, critic_opt, alpha_opt = sac.optimizers(cfg, state.progress)
        critic = gradient_step(critic_loss_fn, state.critic_params, state.critic_opt_state, critic_opt, state, batch,
                               critic_key, cfg)
        state = state.replace(critic_params=critic.params, critic_opt_state=critic.opt_state)

        def actor_temperature_and_targets(state: State):
            actor = gradient_step(actor_loss_fn, state.actor_params, state.actor_opt_state, actor_opt, state, batch,
                                  actor_key, cfg)
            log_prob = actor.aux.pop("log_prob")
            temperature_loss = alpha_loss_fn or (sac.log_alpha_loss if cfg.log_alpha_loss else sac.alpha_loss)
            alpha = gradient_step(temperature_loss, state.log_alpha, state.alpha_opt_state, alpha_opt, state, log_prob,
                                  cfg)
            ratio = dormant_ratio(actor.grads, cfg.dormant_threshold)
            state = state.replace(
                actor_params=actor.params, actor_opt_state=actor.opt_state, log_alpha=alpha.params,
                alpha_opt_state=alpha.opt_state, dormant_ratio=ratio,
                target_critic_params=polyak_update(state.critic_params, state.target_critic_params, cfg.tau))
            return state, {**actor.aux, **alpha.aux, "dormant_ratio": ratio,
                           **grad_norm_metrics(actor=actor, alpha=alpha)}

        updates = state.progress.updates
        state, delayed = delayed_step(updates % cfg.policy_delay == 0, actor_temperature_and_targets, state)
        reset = reset_due(updates, cfg)
        state = jax.lax.cond(reset, lambda s: soft_reset(s, reset_key, cfg), lambda s: s, state)
        weights = state.causal_weights
        return state, {**critic.aux, **delayed, **grad_norm_metrics(critic=critic), "reset": reset.astype(jnp.float32),
                       "causal_weight_min": jnp.min(weights), "causal_weight_max": jnp.max(weights)}

    return update


update = make_update()

# The official values of Config's fields and where each is set (the docs' defaults table puts them beside ours).
_CODE = "ACE code 6de5308"
OFFICIAL = {
    "hidden_sizes": ((1024, 1024, 1024), f"{_CODE} utilis/default_config.py hidden_size, model/model.py: 3 layers"),
    "policy_delay": (2, f"{_CODE} utilis/default_config.py target_update_interval"),
    "log_std_min": (-20.0, f"{_CODE} model/model.py LOG_SIG_MIN, clipped"),
    "log_prob_epsilon": (1e-6, f"{_CODE} model/model.py epsilon"),
    "causal_interval": (10_000, f"{_CODE} main_causal.py causal_sample_interval"),
    "causal_sample_size": (10_000, f"{_CODE} main_causal.py causal_sample_size"),
    "causal_abs": (False, f"{_CODE} utilis/causal_weight.py: softmax of the signed reward row"),
    "reset_rule": ("dormancy", f"{_CODE} main_causal.py reset 'reset'"),
    "log_alpha_loss": (True, f"{_CODE} model/algorithm.py alpha_loss"),
    "reset_interval": (100_000, f"{_CODE} main_causal.py reset_interval"),
    "reset_after": (5_000, f"{_CODE} model/algorithm.py: updates > 5000"),
}

AGENT = Agent(name="ace", Config=Config, init=init, act=act, update=update, check_config=check_config,
              loop_defaults={"learning_starts": 10_000}, refresh=refresh_causal_weights,
              refresh_interval=causal_refresh_interval)
