"""DSAC-T: Distributional Soft Actor-Critic with Three Refinements (Duan et al., arXiv 2310.05858).

Reads top to bottom: Config -> State -> losses -> init / act / update -> AGENT.

Two critics each predict a Gaussian over the soft return, N(mu_i(s, a), sigma_i(s, a)^2), sigma = softplus.
The three refinements of the paper, as the paper-era official code (Jingliang-Duan/DSAC-v2 `dsac_v2.py`,
2023-05 to 2025-07) implements them:
  1. expected value substitution: the mean is regressed on the *expected* target y_q, not a sample;
  2. twin value distributions: per sample, the target critic with the smaller mean supplies y_q and y_z;
  3. variance-based gradient adjustment: the loss is scaled by (b_i^2 + eps), b_i a running mean of sigma_i
     (tau_b = 0.005), and the sampled target y_z is clipped to mu_i +- 3 b_i (the sampled xi to [-3, 3]).
``critic_loss_form="huber"`` selects the 2025-07 official loss instead (commit c5105eb), see
``critic_huber_terms``. Published numbers predate it.

Each refinement is a switch (DSAC-v1 ablations, docs/sources.md), all on by default:
``expected_value_sub`` (1), ``twin_distributions`` (2), and refinement 3 as its two parts ``adaptive_boundary`` (the
clip to mu +- 3 b instead of DSAC-v1's fixed ``td_bound``) and ``grad_scale`` (the (b^2 + eps) factor). Splitting
3 in two is our reading (inferred): the official code always applies both together. All four off is DSAC-v1's
critic loss in the GOPS form (DSAC-v1 fa840a0 ``dsac_v1.py``: one value distribution with its target copy, the mean
on the sampled target, the std on it clipped to mu +- td_bound, eps = 0.1 in the denominators) on this agent's
network, target policy and delayed policy step; the 2021 code's other settings (tanh-squashed log sigma, xi clipped
to +-2: ``--dsac-t.xi-clip 2``, reward scale 0.2, cosine learning rates) are not part of the switches.

Defaults follow the official code (`dsacv2_mlp_mujoco_offserial.py`): critics and policy [256, 256, 256] with
torch.nn.GELU's exact (erf) GELU, policy log std clamped to [-20, 0.5], target networks for both critics *and* the
policy, lr 1e-4 (critics, policy) and 3e-4 (alpha), alpha_0 = e, entropy target -|A|, gamma 0.99, tau 0.005, batch
256; policy, alpha and all targets step every 2nd iteration (iteration counted from 0, so the first update moves
them); the actor and alpha gradients are taken with the critics from before this iteration's critic step. Loop
defaults (``AGENT.loop_defaults``): 20 envs and 1 update per 20 env steps (the official 20 env steps per iteration),
10k warm-up transitions from the initial stochastic policy, no action repeat on any suite (the official schedule is
per simulator step; the ``dmc/`` suite's repeat of 2 gained it nothing, 405 -> 403 on CartpoleBalance in
bench/defaults.py, since the same updates per decision are then half as many per env step). For curves comparable
with SAC/TD3 at 1M env steps (1 update per env step) pass ``--updates-per-step 1``. Deviations:
  * lecun_uniform init with zero biases (Brax) rather than PyTorch's default;
  * the 20 env steps per iteration come from 20 batched envs, one step each, not 20 steps of one env.
"""
from __future__ import annotations

import math
from types import MappingProxyType
from typing import Any

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp
import optax  # the Huber terms

from jaxrl import ConfigError, checks
from jaxrl.agent import Agent, added_field, extra_field
from jaxrl.losses import init_temperature, log_temperature_loss, polyak_update, target_or_online, td_target, with_target
from jaxrl.networks import (
    ACTIVATIONS,
    CriticEnsemble,
    GaussianPolicyHead,
    forward,
    reading,
    sample_tanh_gaussian,
    tanh_gaussian_act,
)
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

CRITIC_LOSS_FORMS = ("paper", "huber")
# The switches of the three refinements (refinement 3 in its two parts); all off is DSAC-v1's critic loss.
REFINEMENTS = ("expected_value_sub", "twin_distributions", "adaptive_boundary", "grad_scale")


@flax.struct.dataclass
class Config(OptimizerConfig):  # Adam's betas, eps, weight decay, clipping, lr schedule
    actor_hidden_sizes: tuple[int, ...] = static((256, 256, 256))
    """hidden layer widths of the policy"""
    critic_hidden_sizes: tuple[int, ...] = static((256, 256, 256))
    """hidden layer widths of each value-distribution critic"""
    activation: str = static("gelu")
    """activation of every hidden layer"""
    batch_size: int = static(256)
    """transitions per gradient update"""
    n_step: int = static(1)
    """rewards summed per sampled transition before bootstrapping (n-step returns; 1 = the paper's one-step target)"""
    policy_delay: int = static(2)
    """iterations per policy, alpha and target update"""
    critic_loss_form: str = static("paper")
    """paper: the paper-era loss with (b^2 + eps) scaling; huber: the 2025-07 official Huber-form loss"""
    expected_value_sub: bool = added_field(True)
    """refinement 1: the mean regresses on the expected target y_q (False: on the sampled y_z, as DSAC-v1)"""
    twin_distributions: bool = added_field(True)
    """refinement 2: two critics, the smaller target mean supplies both targets, the actor on their minimum (False:
    one critic and its own target copy, as DSAC-v1)"""
    adaptive_boundary: bool = added_field(True)
    """refinement 3, first part: the sampled target clipped to mu +- clip_boundary b (False: to mu +- td_bound, as
    DSAC-v1)"""
    grad_scale: bool = added_field(True)
    """refinement 3, second part: each critic's loss scaled by (b^2 + epsilon_b) (False: unscaled, as DSAC-v1)"""
    actor_lr: float = 1e-4
    """Adam learning rate of the policy"""
    critic_lr: float = 1e-4
    """Adam learning rate of the critics"""
    alpha_lr: float = 3e-4
    """Adam learning rate of log alpha"""
    gamma: float = 0.99
    """discount"""
    tau: float = 0.005
    """Polyak rate of the target critics and the target policy"""
    tau_b: float = 0.005
    """rate of the running mean std b of each critic"""
    clip_boundary: float = 3.0
    """the sampled target is clipped to mu +- c b (adaptive_boundary), and xi to [-c, c] unless xi_clip is set"""
    epsilon_b: float = 0.1
    """the eps_b in the variance-based scaling (b^2 + eps_b) and its denominators"""
    huber_delta: float = 50.0
    """delta of the Huber terms of critic_loss_form=huber"""
    td_bound: float = added_field(10.0, static=False)
    """DSAC-v1's fixed boundary b of the sampled target, used when adaptive_boundary is False (the 2021 code's and
    the DSAC-v2 repository's v1 example's 10; GOPS' class default is 20)"""
    xi_clip: float | None = added_field(None, static=False)
    """the target's standard normal draw xi is clipped to [-xi_clip, xi_clip]; None: to clip_boundary's (3, DSAC-T's
    and GOPS' DSAC-v1's; the 2021 DSAC-v1 code clips to 2)"""
    init_alpha: float = math.e
    """initial temperature alpha (official: log alpha_0 = 1)"""
    target_entropy: float | None = None
    """entropy target; None means -|A|"""
    target_networks: bool = added_field(True)
    """a target policy and target critics moved by Polyak averaging (tau); False: the targets read the online
    policy and critics under stop_gradient, with no copies kept and no Polyak step"""


@flax.struct.dataclass
class State:
    actor_params: Any
    target_actor_params: Any
    critic_params: Any
    target_critic_params: Any
    log_alpha: jax.Array
    target_entropy: jax.Array
    actor_opt_state: Any
    critic_opt_state: Any
    alpha_opt_state: Any
    mean_std: jax.Array  # [critics] b_i, the running mean of each critic's sigma over batches
    num_updates: jax.Array  # iterations so far; the policy moves when it is a multiple of policy_delay
    last_policy_metrics: dict[str, jax.Array]  # the last policy step's (DELAYED_METRICS), reported on the
    # iterations that skip the policy
    actor: nn.Module = flax.struct.field(pytree_node=False)
    critic: nn.Module = flax.struct.field(pytree_node=False)
    progress: Progress | None = progress_field()  # where the run is, set by the loop for act/update
    extra: Any = extra_field()  # a plug-in's own learned state; the engine never touches it


# ---------------------------------------------------------------------------------------------- losses


def num_critics(cfg: Config) -> int:
    return 2 if cfg.twin_distributions else 1


def distribution_pass(critic: nn.Module, params, obs, action, train: bool = False, key=None):
    """((mu, sigma), new statistics): one pass of the critics (``jaxrl.networks.forward``; ``train`` with dropout
    from ``key``), mu and sigma each [critics, B], sigma = softplus(raw)."""
    out, statistics = forward(critic, params, obs, action, train=train, key=key)
    return (out[..., 0], jax.nn.softplus(out[..., 1])), statistics


def value_distributions(critic: nn.Module, params, obs, action):
    """(mu, sigma), each [critics, B]: the critics' Gaussian return distributions in inference mode."""
    return distribution_pass(critic, params, obs, action)[0]


def running_mean_std(mean_std, sigma, num_updates, tau_b):
    """b_i <- (1 - tau_b) b_i + tau_b mean_B sg(sigma_i); the first batch initialises b_i to its mean."""
    batch_mean = jnp.mean(jax.lax.stop_gradient(sigma), axis=-1)
    return jnp.where(num_updates == 0, batch_mean, (1.0 - tau_b) * mean_std + tau_b * batch_mean)


def distributional_targets(state: State, batch: Batch, key, cfg: Config):
    """(y_q, y_z), each [B]: expected and sampled soft-return targets of the twin with the smaller mean (of the
    one critic without ``twin_distributions``).

    a' ~ target policy(s'); z_i = mubar_i + clip(xi_i, -c, c) sigmabar_i with xi_i ~ N(0, 1) per critic;
    k = argmin_i mubar_i(s', a'); y_q = r + gamma (1 - d)(mubar_k - alpha log pi(a'|s')), y_z likewise with z_k.
    """
    action_key, xi_key = jax.random.split(key)
    (mean, log_std), _ = forward(state.actor, target_or_online(state.target_actor_params, state.actor_params),
                                 batch.next_obs)
    next_action, next_log_prob = sample_tanh_gaussian(action_key, mean, log_std)
    (next_mu, next_sigma), _ = distribution_pass(
        state.critic, target_or_online(state.target_critic_params, state.critic_params), batch.next_obs,
        next_action, train=True, key=jax.random.fold_in(key, 1))
    xi_clip = cfg.clip_boundary if cfg.xi_clip is None else cfg.xi_clip
    xi = jnp.clip(jax.random.normal(xi_key, next_mu.shape), -xi_clip, xi_clip)
    next_sample = next_mu + xi * next_sigma
    if cfg.twin_distributions:
        # The official code's torch.where(q1 < q2, q1_sample, q2_sample): ties go to the second critic.
        smaller = next_mu[0] < next_mu[1]
        next_mean = jnp.where(smaller, next_mu[0], next_mu[1])
        next_sample = jnp.where(smaller, next_sample[0], next_sample[1])
    else:
        next_mean, next_sample = next_mu[0], next_sample[0]
    soft = jnp.exp(state.log_alpha) * next_log_prob
    y_q = td_target(batch, next_mean - soft)
    y_z = td_target(batch, next_sample - soft)
    return jax.lax.stop_gradient(y_q), jax.lax.stop_gradient(y_z)


def sample_target_bound(mean_std, cfg: Config):
    """c b_i ([critics, 1]: c running stds) with ``adaptive_boundary``, else DSAC-v1's fixed td_bound."""
    return cfg.clip_boundary * mean_std[:, None] if cfg.adaptive_boundary else cfg.td_bound


def clipped_sample_target(y_z, mu, bound):
    """mu_i + clip(y_z - mu_i, -bound_i, bound_i), [critics, B]: the sampled target kept near mu_i."""
    mu = jax.lax.stop_gradient(mu)
    return mu + jnp.clip(y_z[None, :] - mu, -bound, bound)


def critic_paper_terms(mu, sigma, y_q, y_z_clipped, mean_std, cfg: Config):
    """Per-critic loss L_i of the paper-era code (DSAC-v2 `dsac_v2.py` before c5105eb), [critics]; its gradients
    are the paper's (Duan et al., arXiv 2310.05858):

        dL_i/dmu_i    = -(b_i^2 + eps) (y_q - mu_i) / (sighat_i^2 + eps)                 / B per sample
        dL_i/dsigma_i = -(b_i^2 + eps) ((yhat_z,i - mu_i)^2 - sighat_i^2) / (sighat_i^3 + eps) / B
    with sighat = sg(max(sigma, 0)): Gaussian-NLL gradients with the expected target substituted in the mean's.
    ``y_q`` is the sampled target when ``expected_value_sub`` is off; the (b_i^2 + eps) factor is 1 without
    ``grad_scale`` (DSAC-v1's GOPS loss when both are off and the clip is the fixed td_bound).
    """
    eps, sg = cfg.epsilon_b, jax.lax.stop_gradient
    sigma_hat = sg(jnp.maximum(sigma, 0.0))
    mean_grad = sg((y_q[None, :] - mu) / (sigma_hat**2 + eps))
    std_grad = sg((jnp.square(sg(mu) - y_z_clipped) - sigma_hat**2) / (sigma_hat**3 + eps))
    scale = sg(jnp.square(mean_std)) + eps if cfg.grad_scale else 1.0
    return scale * jnp.mean(-mean_grad * mu - std_grad * sigma, axis=-1)


def huber(x, y, delta):
    """0.5 (x - y)^2 if |x - y| <= delta else delta (|x - y| - delta / 2), elementwise."""
    return optax.huber_loss(x, y, delta=delta)


def critic_huber_terms(mu, sigma, y_q, y_z_clipped, mean_std, cfg: Config):
    """Per-critic loss of the official code since 2025-07-12 (commit c5105eb), [2]:

        w_i = clip(b_i^2 / (sighat_i^2 + eps), 0.1, 10)
        L_i = E[w_i (Huber(mu_i, y_q) + sigma_i (sighat_i^2 - Huber(sg mu_i, yhat_z,i)) / (sighat_i + eps))]
    """
    eps, sg = cfg.epsilon_b, jax.lax.stop_gradient
    sigma_hat = sg(jnp.maximum(sigma, 0.0))
    weight = sg(jnp.clip(jnp.square(mean_std)[:, None] / (sigma_hat**2 + eps), 0.1, 10.0))
    std_term = sigma * sg((sigma_hat**2 - huber(sg(mu), y_z_clipped, cfg.huber_delta)) / (sigma_hat + eps))
    return jnp.mean(weight * (huber(mu, y_q[None, :], cfg.huber_delta) + std_term), axis=-1)


def critic_loss(critic_params, state: State, batch: Batch, key, cfg: Config, target_fn=distributional_targets):
    """L_1 + L_2 on one minibatch against the targets (y_q, y_z) = target_fn(...); also returns the updated running
    stds b (aux "mean_std"). Critic passes are training passes (dropout keys folded from ``key``); new statistics
    return as aux[NETWORK_STATE]."""
    (mu, sigma), statistics = distribution_pass(state.critic, critic_params, batch.obs, batch.action, train=True,
                                                key=jax.random.fold_in(key, 2))
    mean_std = running_mean_std(state.mean_std, sigma, state.num_updates, cfg.tau_b)
    y_q, y_z = target_fn(state, batch, key, cfg)
    y_z_clipped = clipped_sample_target(y_z, mu, sample_target_bound(mean_std, cfg))
    terms = critic_huber_terms if cfg.critic_loss_form == "huber" else critic_paper_terms
    mean_target = y_q if cfg.expected_value_sub else y_z  # refinement 1
    loss = jnp.sum(terms(mu, sigma, mean_target, y_z_clipped, mean_std, cfg))
    return loss, {"critic_loss": loss, "q_mean": jnp.mean(mu), "q_std": jnp.mean(sigma),
                  "td_error_sq": jnp.mean(jnp.square(y_q[None, :] - mu)), "target_mean": jnp.mean(y_q),
                  "mean_std": mean_std, **network_state(statistics)}


def actor_loss(actor_params, state: State, batch: Batch, key, cfg: Config):
    """E[alpha log pi(a|s) - min_i mu_i(s, a)], a ~ pi(.|s) reparameterised, on the online critics' means."""
    (mean, log_std), statistics = forward(state.actor, actor_params, batch.obs, train=True,
                                          key=jax.random.fold_in(key, 1))
    action, log_prob = sample_tanh_gaussian(key, mean, log_std)
    (mu, _), _ = distribution_pass(state.critic, state.critic_params, batch.obs, action, train=True,
                                   key=jax.random.fold_in(key, 2))
    loss = jnp.mean(jnp.exp(jax.lax.stop_gradient(state.log_alpha)) * log_prob - jnp.min(mu, axis=0))
    return loss, {"actor_loss": loss, "entropy": -jnp.mean(log_prob), "log_prob": log_prob,
                  **network_state(statistics)}


def alpha_loss(log_alpha, state: State, log_prob, cfg: Config):
    """-log alpha * sg(E log pi + target entropy), the official form."""
    loss = log_temperature_loss(log_alpha, log_prob, state.target_entropy)
    return loss, {"alpha_loss": loss}


# ------------------------------------------------------------------------------------- init / act / update


def optimizers(cfg: Config, progress: Progress | None = None):
    """Built from cfg at every call so learning rates may be traced values (sweeps vmap over them); ``progress``
    (``state.progress``) feeds ``lr_schedule``."""
    return (adam(cfg, cfg.actor_lr, progress), adam(cfg, cfg.critic_lr, progress),
            adam(cfg, cfg.alpha_lr, progress, weight_decay=False))


def check_config(cfg: Config) -> None:
    """Called by the loop on the host with concrete values before compiling (inside, numeric fields are traced)."""
    if cfg.critic_loss_form not in CRITIC_LOSS_FORMS:
        raise ConfigError(f"critic_loss_form={cfg.critic_loss_form!r} is not one of: {', '.join(CRITIC_LOSS_FORMS)}")
    if cfg.activation not in ACTIVATIONS:
        raise ConfigError(f"activation={cfg.activation!r} is not one of: {', '.join(ACTIVATIONS)}")
    checks.positive_ints(cfg, "actor_hidden_sizes", "critic_hidden_sizes", "batch_size", "n_step", "policy_delay")
    checks.positive(cfg, "actor_lr", "critic_lr", "alpha_lr", "init_alpha", "clip_boundary", "epsilon_b",
                    "huber_delta", "td_bound")
    if cfg.xi_clip is not None:
        checks.positive(cfg, "xi_clip")
    switched_off = [name for name in REFINEMENTS if not getattr(cfg, name)]
    if cfg.critic_loss_form == "huber" and switched_off:
        raise ConfigError(f"{', '.join(f'{n}=False' for n in switched_off)}: the refinement switches apply to "
                          "critic_loss_form='paper' (DSAC-v1's ablations of the paper's loss), not to the huber form")
    checks.unit_interval(cfg, "gamma", "tau", "tau_b")
    checks.finite_or_none(cfg, "target_entropy")
    checks.optimizer_fields(cfg)


def init(key, spec: EnvSpec, cfg: Config) -> State:
    actor = reading(spec.actor_obs, GaussianPolicyHead(cfg.actor_hidden_sizes, spec.action_size, cfg.activation,
                                                       -20.0, 0.5, squash_log_std=False))
    critic = reading(spec.critic_obs, CriticEnsemble(cfg.critic_hidden_sizes, num_critics=num_critics(cfg),
                                                     output_size=2, activation=cfg.activation))
    actor_key, critic_key = jax.random.split(key)
    obs, action = zeros_obs(spec, (1,)), jnp.zeros((1, spec.action_size))
    actor_params, critic_params = actor.init(actor_key, obs), critic.init(critic_key, obs, action)
    log_alpha, target_entropy = init_temperature(cfg.init_alpha, cfg.target_entropy, spec.action_size)
    actor_opt, critic_opt, alpha_opt = optimizers(cfg)
    return State(
        actor_params=actor_params,
        target_actor_params=actor_params if cfg.target_networks else None,
        critic_params=critic_params,
        target_critic_params=critic_params if cfg.target_networks else None,
        log_alpha=log_alpha,
        target_entropy=target_entropy,
        actor_opt_state=actor_opt.init(trainable(actor_params)),
        critic_opt_state=critic_opt.init(trainable(critic_params)),
        alpha_opt_state=alpha_opt.init(log_alpha),
        mean_std=jnp.zeros((num_critics(cfg),), jnp.float32),
        num_updates=jnp.zeros((), jnp.int32),
        last_policy_metrics=dict.fromkeys(DELAYED_METRICS, jnp.zeros((), jnp.float32)),
        actor=actor,
        critic=critic,
    )


def act(state: State, obs, key, cfg: Config, deterministic: bool = False, carry=()):
    return tanh_gaussian_act(state.actor, state.actor_params, obs, key, deterministic), carry


# What the delayed policy step reports; the iterations in between repeat its last values.
DELAYED_METRICS = ("actor_loss", "entropy", "grad_norm/actor", "grad_norm/alpha")


def make_update(critic_loss_fn=critic_loss, actor_loss_fn=actor_loss, alpha_loss_fn=alpha_loss, target_fn=None):
    """An ``update`` optimising the given losses. ``critic_loss_fn`` returns the new b as aux "mean_std";
    ``actor_loss_fn`` returns "actor_loss", "entropy" and "log_prob" (for the alpha loss) as aux. ``target_fn``
    replaces the critic loss's targets alone (same signature as ``distributional_targets``)."""
    critic_loss_fn = with_target(critic_loss_fn, target_fn)

    def update(state: State, batch: Batch, key, cfg: Config):
        critic_key, actor_key = jax.random.split(key)
        actor_opt, critic_opt, alpha_opt = optimizers(cfg, state.progress)
        critic = gradient_step(critic_loss_fn, state.critic_params, state.critic_opt_state, critic_opt, state, batch,
                               critic_key, cfg)
        mean_std = critic.aux.pop("mean_std")

        def policy_step(state: State):
            # ``state`` still holds the pre-step critics: the policy gradient is taken with them (official order).
            actor = gradient_step(actor_loss_fn, state.actor_params, state.actor_opt_state, actor_opt, state, batch,
                                  actor_key, cfg)
            alpha = gradient_step(alpha_loss_fn, state.log_alpha, state.alpha_opt_state, alpha_opt, state,
                                  actor.aux["log_prob"], cfg)
            metrics = {"actor_loss": actor.aux["actor_loss"], "entropy": actor.aux["entropy"],
                       **grad_norm_metrics(actor=actor, alpha=alpha)}
            return state.replace(
                actor_params=actor.params, actor_opt_state=actor.opt_state, log_alpha=alpha.params,
                alpha_opt_state=alpha.opt_state,
                target_actor_params=polyak_update(actor.params, state.target_actor_params, cfg.tau),
                target_critic_params=polyak_update(critic.params, state.target_critic_params, cfg.tau)), metrics

        # The official iteration counter starts at 0: the policy moves on iterations 0, d, 2d, ...
        state, delayed = delayed_step(every_nth(state.num_updates, cfg.policy_delay), policy_step, state,
                                      "last_policy_metrics")
        state = state.replace(critic_params=critic.params, critic_opt_state=critic.opt_state, mean_std=mean_std,
                              num_updates=state.num_updates + 1)
        return state, {**critic.aux, **grad_norm_metrics(critic=critic), **delayed,
                       "alpha": jnp.exp(state.log_alpha), "mean_std": jnp.mean(mean_std)}

    return update


update = make_update()

# The official values of Config's fields and where each is set (the docs' defaults table puts them beside ours).
_EXAMPLE, _ALG = "DSAC-v2 53447f4 dsacv2_mlp_mujoco_offserial.py", "DSAC-v2 53447f4 dsac_v2.py"
OFFICIAL = {
    "actor_hidden_sizes": ((256, 256, 256), f"{_EXAMPLE} --policy_hidden_sizes"),
    "critic_hidden_sizes": ((256, 256, 256), f"{_EXAMPLE} --value_hidden_sizes"),
    "activation": ("gelu", f"{_EXAMPLE} --value_hidden_activation, --policy_hidden_activation"),
    "batch_size": (256, f"{_EXAMPLE} --replay_batch_size"), "policy_delay": (2, f"{_EXAMPLE} --delay_update"),
    "critic_loss_form": ("huber", f"{_ALG}, since c5105eb (2025-07); before it: paper"),
    "actor_lr": (1e-4, f"{_EXAMPLE} --policy_learning_rate"), "critic_lr": (1e-4, f"{_EXAMPLE} --value_learning_rate"),
    "alpha_lr": (3e-4, f"{_EXAMPLE} --alpha_learning_rate"), "gamma": (0.99, f"{_EXAMPLE} --gamma"),
    "tau": (0.005, f"{_EXAMPLE} --tau"), "tau_b": (0.005, f"{_ALG}: tau_b defaults to tau"),
    "clip_boundary": (3.0, f"{_ALG}: td_bound = 3 * mean_std, z clamped to [-3, 3]"),
    "epsilon_b": (0.1, f"{_ALG}: bias = 0.1"), "huber_delta": (50.0, f"{_ALG}: huber_loss(delta=50), since c5105eb"),
    "td_bound": (10.0, "a DSAC-v1 setting: DSAC-v1 2020ee3 Main.py --TD_bound, DSAC-v2's dsacv1 example"),
    "init_alpha": (math.e, f"{_ALG}: log_alpha = 1"), "target_entropy": ("-|A|", f"{_ALG}: -action_dim"),
}

AGENT = Agent(name="dsac_t", Config=Config, init=init, act=act, update=update, check_config=check_config,
              loop_defaults=MappingProxyType(dict(num_envs=20, updates_per_step=1 / 20, learning_starts=10_000,
                                                  warmup="policy", action_repeat=1)))
