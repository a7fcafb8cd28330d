"""DR-SAC: distributionally robust SAC against a KL ball of transition models (Cui, Zhou, Han, Hanasusanto, Wang,
Zhang & Zhou, ICLR 2026, arXiv 2506.12622), in the online setting of the official code (Lemutisme/DR-SAC ``sac.py``,
``mode: continuous``; docs/sources.md).

    jaxrl train --agent experiments.plugins.dr_sac:AGENT --env toy/Pendulum --dr-sac.delta 0.1

The critics regress on the robust soft Bellman target: the worst expected next value over every transition model
P within KL(P || P0) <= delta of the nominal one P0, in its dual form (a maximum over one scalar beta > 0),

    inf_P E_P[V(s')] = sup_beta  -beta log E_{s' ~ P0}[exp(-V(s') / beta)] - beta delta,
    Vrob(s, a; beta) = -beta (logsumexp_k(-Vbar(s'_k) / beta) - log N) - beta delta,   s'_k ~ P0hat(.|s, a), k <= N
    y = r + gamma (1 - d) Vrob(s, a; g(s, a))

estimated with N next states drawn from a learned model P0hat and the target value network Vbar. As in the code
(``sac.py`` at 041e839, the newest version read; docs/sources.md describes the earlier 1e023e5, whose update
order was model -> dual -> Q -> V, whose V target read the online critics and whose VAE loss summed its terms):
  * P0hat is a conditional VAE (s, a, s') -> s' (latent 5, the agent's hidden widths), trained every update on the
    minibatch with mean squared reconstruction error + the mean KL to N(0, I); samples decode prior draws z ~ N(0, I).
    Its encoder is the code's (``MLPTransitionVAE``, ``sac.py`` lines 152-159; ``utils.py`` lines 5-14: ``build_net``
    gives every layer but the last ``hidden_activation``): ``build_net([2S + A] + hidden, nn.ReLU, nn.Identity)``,
    i.e. ReLU after every hidden layer but the last, which stays linear, then the linear mean and log-variance
    layers (``e_mu``, ``e_logvar``; here one layer of 2 x latent outputs, split); ``encoder_last_relu=True`` puts a
    ReLU after the last hidden layer too (this file before issue 47). The decoder has ReLU after every hidden layer
    and a linear output (``build_net(d_layers, nn.ReLU, nn.Identity)``).
  * beta = g(s, a) is a network (the agent's hidden widths, ReLU, an exp output: the code's ``functional`` dual),
    warm-started across updates and moved by ``dual_steps`` (5) Adam steps that maximise the batch mean of Vrob
    before the target is read with the moved g.
  * V is a network with a Polyak target (tau), regressed on sg(min_j Qbar_j(s, a~) - alpha log pi(a~|s)), a~ ~ pi.
  * Update order: V -> model -> dual -> critics -> actor -> temperature -> targets (critics and V).
  * The temperature's loss is the code's log-alpha form, -(log_alpha * (log_pi + target_entropy).detach()).mean()
    (``sac.py`` line 620; here ``sac.log_alpha_loss``). ``log_alpha_loss=False``: SAC's alpha form, -alpha *
    sg(log pi + target entropy) (this file before issue 47): the same fixed point, but a gradient alpha times as
    large, and as alpha changes in training, Adam's moments do not cancel that factor.
The critics, actor and temperature are this library's SAC (``sac.make_update(alpha_loss_fn=..., target_fn=...)``),
so SAC's networks, initialisation and Adam are used throughout. Every numeric field is traced: a sweep vmaps over
``delta``. Saved runs from before issue 47 resume with ``log_alpha_loss=False`` and ``encoder_last_relu=True``.

(not in the paper) The paper reports the offline setting only; this is the code's online mode (``mode: continuous``).
How the nominal next states are obtained online (the issue's question): the model is fitted to the replay buffer's
transitions as the agent trains (one step per update, on the update's own minibatch); the offline variant trains
it on a fixed dataset. Kept from the offline code: the model, the dual, the V-network, the update order.

Deviations from the code, all deliberate:
  * Adam (the code: AdamW, weight decay 0.01) and SAC's networks (tanh-Gaussian log std in [-5, 2], lecun init);
  * the model sees the observations the critics see (normalised ones under ``--normalize-obs``); the code
    normalises states by its replay buffer's statistics, which this engine's buffer does not keep;
  * the critics have Polyak targets (the code's later versions too; its first version had none) and the actor's
    loss uses the online critics (SAC's; the later code reads the target critics there);
  * time limits bootstrap (the code's online mode stores ``terminated or truncated`` as done);
  * the fixed 5 dual steps of the code's later versions (the first version stopped early on a 1e-3 relative
    change); ``model_samples`` 200 as the code, but every update decodes B x N states and evaluates Vbar on them:
    the CPU comparison (docs/plugins/dr_sac.md) uses N = 16 (said there).
(inferred) delta defaults to 0.1, the one value in the code's run script (its config default 0 makes the target the
nominal mean); the paper's per-task radii were not found.
"""
from __future__ import annotations

from typing import Any

import flax.linen as nn
import flax.struct
import jax
import jax.numpy as jnp
import optax

from agents import sac
from jaxrl import checks
from jaxrl.agent import added_field
from jaxrl.losses import polyak_update, target_or_online, td_target
from jaxrl.networks import MLP, sample_tanh_gaussian, select_part
from jaxrl.optim import gradient_step
from jaxrl.types import Batch, EnvSpec, zeros_obs

static = lambda default: flax.struct.field(pytree_node=False, default=default)  # noqa: E731


@flax.struct.dataclass
class Config(sac.Config):
    delta: float = 0.1
    """KL radius of the set of transition models (0: the nominal model's mean value; (inferred) 0.1)"""
    model_samples: int = static(200)
    """next states N drawn from the learned model per transition (B x N value evaluations per update)"""
    dual_steps: int = static(5)
    """Adam steps on the dual network g per update"""
    dual_lr: float = 5e-4
    """Adam learning rate of the dual network g (the code's g_lr)"""
    model_lr: float = 5e-4
    """Adam learning rate of the transition VAE (the code's r_lr)"""
    value_lr: float = 3e-4
    """Adam learning rate of the value network V (the code uses the critics' rate)"""
    latent_size: int = static(5)
    """latent dimensions of the transition VAE"""
    log_alpha_loss: bool = added_field(True, before=False)
    """the temperature's loss in log-alpha form, as the code (False: SAC's alpha form)"""
    encoder_last_relu: bool = added_field(False, before=True)
    """False: no activation after the VAE encoder's last hidden layer, as the code (True: a ReLU there too)"""


class Encoder(nn.Module):
    """The code's VAE encoder: Dense layers of ``hidden_sizes`` with ReLU after every one but the last (its
    ``build_net(e_layers, nn.ReLU, nn.Identity)``), then a linear layer of ``output_size`` (mu and log-variance).
    Same parameters, names and init as ``MLP(hidden_sizes, output_size)``, which ``last_relu`` gives exactly."""

    hidden_sizes: tuple[int, ...]
    output_size: int
    last_relu: bool = False

    @nn.compact
    def __call__(self, x):
        init = MLP.kernel_init  # MLP's init, so only the activation differs from it
        for i, width in enumerate(self.hidden_sizes):
            x = nn.Dense(width, kernel_init=init)(x)
            if self.last_relu or i < len(self.hidden_sizes) - 1:  # the code's last hidden activation is Identity
                x = nn.relu(x)
        return nn.Dense(self.output_size, kernel_init=init)(x)


class TransitionVAE(nn.Module):
    """P0hat(s' | s, a): encoder (s, a, s') -> N(mu, exp(logvar)) over z, decoder (s, a, z) -> s'."""

    hidden_sizes: tuple[int, ...]
    obs_size: int
    latent_size: int
    encoder_last_relu: bool = False

    def setup(self):
        self.encoder = Encoder(self.hidden_sizes, 2 * self.latent_size, self.encoder_last_relu)
        self.decoder = MLP(self.hidden_sizes, self.obs_size)

    def __call__(self, obs, action, next_obs, key):
        """(reconstruction of s', mu, logvar) with z = mu + exp(logvar / 2) eps."""
        mu, logvar = jnp.split(self.encoder(jnp.concatenate([obs, action, next_obs], axis=-1)), 2, axis=-1)
        z = mu + jnp.exp(0.5 * logvar) * jax.random.normal(key, mu.shape)
        return self.decode(obs, action, z), mu, logvar

    def decode(self, obs, action, z):
        return self.decoder(jnp.concatenate([obs, action, z], axis=-1))


class DualNetwork(nn.Module):
    """beta = g(s, a) = exp(MLP(s, a)) > 0."""

    hidden_sizes: tuple[int, ...]

    @nn.compact
    def __call__(self, obs, action):
        return jnp.exp(MLP(self.hidden_sizes, 1)(jnp.concatenate([obs, action], axis=-1))[..., 0])


class ValueNetwork(nn.Module):
    hidden_sizes: tuple[int, ...]

    @nn.compact
    def __call__(self, obs):
        return MLP(self.hidden_sizes, 1)(obs)[..., 0]


@flax.struct.dataclass
class State(sac.State):
    value_params: Any = None
    target_value_params: Any = None
    value_opt_state: Any = None
    model_params: Any = None
    model_opt_state: Any = None
    dual_params: Any = None
    dual_opt_state: Any = None
    value: nn.Module = flax.struct.field(pytree_node=False, default=None)
    model: nn.Module = flax.struct.field(pytree_node=False, default=None)
    dual: nn.Module = flax.struct.field(pytree_node=False, default=None)
    obs_part: str | None = flax.struct.field(pytree_node=False, default=None)  # what V, the model and g read


# ---------------------------------------------------------------------------------------------- losses


def robust_value(next_values, beta, delta):
    """Vrob = -beta (logsumexp_k(-v_k / beta) - log N) - beta delta over the last axis of ``next_values`` [..., N]:
    between min_k v_k (beta -> 0) and the mean of v (beta -> inf, delta = 0)."""
    num_samples = next_values.shape[-1]
    beta = beta[..., None]
    return (-beta * (jax.scipy.special.logsumexp(-next_values / beta, axis=-1, keepdims=True)
                     - jnp.log(num_samples)) - beta * delta)[..., 0]


def value_loss(value_params, state: State, batch: Batch, key, cfg: Config):
    """E[(V(s) - sg(min_j Qbar_j(s, a~) - alpha log pi(a~|s)))^2], a~ ~ pi(.|s)."""
    mean, log_std = state.actor.apply(state.actor_params, batch.obs)
    action, log_prob = sample_tanh_gaussian(key, mean, log_std)
    q = state.critic.apply(target_or_online(state.target_critic_params, state.critic_params), batch.obs, action)
    q = jnp.min(q[..., 0], axis=0)
    target = jax.lax.stop_gradient(q - jnp.exp(state.log_alpha) * log_prob)
    v = state.value.apply(value_params, select_part(batch.obs, state.obs_part))
    loss = jnp.mean(jnp.square(v - target))
    return loss, {"value_loss": loss, "v_mean": jnp.mean(v)}


def model_loss(model_params, state: State, batch: Batch, key, cfg: Config):
    """mean (s'hat - s')^2 + mean KL(N(mu, exp logvar) || N(0, I)), means over every element (the code's)."""
    obs, next_obs = select_part(batch.obs, state.obs_part), select_part(batch.next_obs, state.obs_part)
    reconstruction, mu, logvar = state.model.apply(model_params, obs, batch.action, next_obs, key)
    mse = jnp.mean(jnp.square(reconstruction - next_obs))
    kl = -0.5 * jnp.mean(1.0 + logvar - jnp.square(mu) - jnp.exp(logvar))
    return mse + kl, {"model_loss": mse + kl, "model_mse": mse, "model_kl": kl}


def nominal_next_values(state: State, batch: Batch, key, cfg: Config):
    """Vbar(s'_k) [B, N] at N next states decoded from prior draws z_k ~ N(0, I) for each (s, a)."""
    obs = select_part(batch.obs, state.obs_part)
    z = jax.random.normal(key, (cfg.model_samples, *obs.shape[:-1], cfg.latent_size))
    obs, action = (jnp.broadcast_to(x, (cfg.model_samples, *x.shape)) for x in (obs, batch.action))
    samples = state.model.apply(state.model_params, obs, action, z, method=TransitionVAE.decode)  # [N, B, S]
    values = state.value.apply(state.target_value_params, samples)
    return jax.lax.stop_gradient(jnp.moveaxis(values, 0, -1))


def dual_loss(dual_params, state: State, batch: Batch, next_values, cfg: Config):
    """-mean_B Vrob(s, a; g(s, a)): g ascends the dual objective (the tightest lower bound)."""
    beta = state.dual.apply(dual_params, select_part(batch.obs, state.obs_part), batch.action)
    objective = jnp.mean(robust_value(next_values, beta, cfg.delta))
    return -objective, {"dual_objective": objective, "beta": jnp.mean(beta)}


# ------------------------------------------------------------------------------------- init / act / update


def check_config(cfg: Config) -> None:
    sac.check_config(cfg)
    checks.non_negative(cfg, "delta")
    checks.positive(cfg, "dual_lr", "model_lr", "value_lr")
    checks.positive_ints(cfg, "model_samples", "dual_steps", "latent_size")
    checks.require(cfg, "n_step", lambda n: n == 1, "1 (the model predicts one step: s' of (s, a))")


def init(key, spec: EnvSpec, cfg: Config) -> State:
    base_key, value_key, model_key, dual_key = jax.random.split(key, 4)
    base = sac.init(base_key, spec, cfg)
    part = spec.critic_obs
    obs = select_part(zeros_obs(spec, (1,)), part)
    action = jnp.zeros((1, spec.action_size))
    value = ValueNetwork(cfg.hidden_sizes)
    model = TransitionVAE(cfg.hidden_sizes, obs.shape[-1], cfg.latent_size, cfg.encoder_last_relu)
    dual = DualNetwork(cfg.hidden_sizes)
    value_params = value.init(value_key, obs)
    model_params = model.init(model_key, obs, action, obs, jax.random.PRNGKey(0))
    dual_params = dual.init(dual_key, obs, action)
    return State(**{f: getattr(base, f) for f in base.__dataclass_fields__ if f != "progress"},
                 value_params=value_params, target_value_params=value_params,
                 value_opt_state=optax.adam(cfg.value_lr).init(value_params),
                 model_params=model_params, model_opt_state=optax.adam(cfg.model_lr).init(model_params),
                 dual_params=dual_params, dual_opt_state=optax.adam(cfg.dual_lr).init(dual_params),
                 value=value, model=model, dual=dual, obs_part=part)


def robust_step(state: State, batch: Batch, key, cfg: Config):
    """V, model and dual steps (in the code's order), then the robust TD target read with the moved g."""
    value_key, model_key, sample_key = jax.random.split(key, 3)
    value = gradient_step(value_loss, state.value_params, state.value_opt_state, optax.adam(cfg.value_lr), state,
                          batch, value_key, cfg)
    model = gradient_step(model_loss, state.model_params, state.model_opt_state, optax.adam(cfg.model_lr), state,
                          batch, model_key, cfg)
    state = state.replace(value_params=value.params, value_opt_state=value.opt_state, model_params=model.params,
                          model_opt_state=model.opt_state)
    next_values = nominal_next_values(state, batch, sample_key, cfg)

    def dual_ascent(carry, _):
        params, opt_state = carry
        step = gradient_step(dual_loss, params, opt_state, optax.adam(cfg.dual_lr), state, batch, next_values, cfg)
        return (step.params, step.opt_state), None

    (dual_params, dual_opt_state), _ = jax.lax.scan(dual_ascent, (state.dual_params, state.dual_opt_state), None,
                                                    length=cfg.dual_steps)
    state = state.replace(dual_params=dual_params, dual_opt_state=dual_opt_state)
    _, dual_aux = dual_loss(dual_params, state, batch, next_values, cfg)
    beta = state.dual.apply(dual_params, select_part(batch.obs, state.obs_part), batch.action)
    target = jax.lax.stop_gradient(td_target(batch, robust_value(next_values, beta, cfg.delta)))
    metrics = {**value.aux, **model.aux, **dual_aux, "nominal_mean": jnp.mean(next_values)}
    return state, target, metrics


def update(state: State, batch: Batch, key, cfg: Config):
    robust_key, sac_key = jax.random.split(key)
    state, target, metrics = robust_step(state, batch, robust_key, cfg)
    alpha_loss_fn = sac.log_alpha_loss if cfg.log_alpha_loss else sac.alpha_loss
    state, sac_metrics = sac.make_update(alpha_loss_fn=alpha_loss_fn, target_fn=lambda *_: target)(
        state, batch, sac_key, cfg)
    state = state.replace(target_value_params=polyak_update(state.value_params, state.target_value_params, cfg.tau))
    return state, {**sac_metrics, **metrics}


# The official values of Config's fields and where each is set (the docs' defaults table puts them beside ours).
_CODE = "DR-SAC 041e839 sac.py"
OFFICIAL = {
    "model_samples": (200, _CODE), "dual_steps": (5, f"{_CODE}: fixed dual steps"),
    "latent_size": (5, f"{_CODE}: the transition VAE's latent"),
    "log_alpha_loss": (True, f"{_CODE} line 620"),
    "encoder_last_relu": (False, f"{_CODE} lines 152-159, utils.py lines 5-14: build_net's last activation Identity"),
}

AGENT = sac.AGENT._replace(name="dr_sac", Config=Config, init=init, update=update, check_config=check_config)
