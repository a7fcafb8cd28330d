"""Targets and losses the agents share: Polyak averaging, the TD target, SAC's automatic temperature and the
quantile Huber loss (distributional critics: TQC, DSAC-T's relatives)."""
from __future__ import annotations

import functools

import jax
import jax.numpy as jnp


def polyak_update(params, target_params, tau):
    """target <- tau * params + (1 - tau) * target, leaf by leaf. ``tau`` may be a traced scalar. An agent without
    target networks (``target_params`` None: CrossQ, ``--sac.target-networks False``) has none to move: None."""
    if target_params is None:
        return None
    return jax.tree.map(lambda p, t: tau * p + (1.0 - tau) * t, params, target_params)


def target_or_online(target_params, params):
    """The parameters a TD target reads: the target network's, or, in an agent without target networks
    (``target_params`` None), the online network's under ``stop_gradient`` (no copy kept, no Polyak step)."""
    return jax.lax.stop_gradient(params) if target_params is None else target_params


def td_target(batch, next_value):
    """y = r + discount (1 - terminated) V(s') for each transition of ``batch``, discount its gamma^m (gamma for
    one-step transitions; n-step ones sum m rewards, ``jaxrl.types.Batch``). ``next_value`` is [B] or [B, ...]
    (atoms, quantiles): the batch's [B] fields broadcast over its trailing axes. Truncation is deliberately
    absent: time limits bootstrap."""
    def per_sample(x):
        return jnp.reshape(x, x.shape + (1,) * (jnp.ndim(next_value) - x.ndim))

    not_done = 1.0 - batch.terminated.astype(batch.reward.dtype)
    return per_sample(batch.reward) + per_sample(batch.discount * not_done) * next_value


def init_temperature(init_alpha: float, target_entropy: float | None, action_size: int):
    """(log alpha_0, target entropy) as arrays; a target of None means -|A| (the SAC paper's rule)."""
    target = -float(action_size) if target_entropy is None else target_entropy
    return jnp.log(jnp.asarray(init_alpha, jnp.float32)), jnp.asarray(target, jnp.float32)


def temperature_loss(log_alpha, log_prob, target_entropy):
    """SAC's automatic temperature objective, CleanRL form: -alpha * sg(log pi + target_entropy), averaged.

    Its gradient w.r.t. log alpha is -alpha * E[log pi + H_target]: alpha grows when the policy's entropy
    (-log pi) falls below the target.
    """
    return -jnp.mean(jnp.exp(log_alpha) * jax.lax.stop_gradient(log_prob + target_entropy))


def log_temperature_loss(log_alpha, log_prob, target_entropy):
    """The SB3 / TQC form of the temperature objective: -log alpha * sg(log pi + target_entropy), averaged.

    Same sign of gradient as ``temperature_loss`` but without the factor alpha.
    """
    return -jnp.mean(log_alpha * jax.lax.stop_gradient(log_prob + target_entropy))


def _quantile_huber_terms(quantiles, targets, target_mask, kappa):
    num_atoms = quantiles.shape[-1]
    tau = (2.0 * jnp.arange(num_atoms, dtype=quantiles.dtype) + 1.0) / (2.0 * num_atoms)
    delta = targets[None, :, None, :] - quantiles[..., None]  # [N, B, M, K]
    weight = jnp.abs(tau[:, None] - (delta < 0).astype(quantiles.dtype)) * target_mask
    # The mean over kept terms: N B M * (number of kept targets).
    count = quantiles.size * jnp.sum(target_mask)
    return delta, weight, count


def quantile_huber_loss(quantiles, targets, kappa: float = 1.0, target_mask=None):
    """Quantile regression Huber loss, averaged over every (critic, batch, atom, kept target) term.

    quantiles: [N, B, M] predicted atoms theta_n^m at midpoints tau_m = (2m - 1) / 2M;
    targets: [B, K] target atoms y_k; target_mask: [K] 1 for targets that count, 0 for dropped ones (TQC's
    truncation as a mask, so the number dropped can be a traced, swept value; default: all count).
    Term: |tau_m - 1{delta < 0}| * H_kappa(delta) / kappa, delta = y_k - theta.
    The pairwise [N, B, M, K] tensor is one broadcast expression, which XLA fuses. The gradient is written by
    hand (``_quantile_huber_bwd``): d term / d theta = -|tau - 1{delta < 0}| clip(delta, -kappa, kappa) / kappa,
    one fused pass. Measured on CPU for TQC's 5x256x25x115 terms: the loss's gradient alone 21 ms -> 4 ms; the
    whole TQC update (5 critics of 3x512, batch 256) 59 -> 56 ms, as the critics' matmuls dominate it.
    """
    if target_mask is None:
        target_mask = jnp.ones(targets.shape[-1], quantiles.dtype)
    return _quantile_huber_loss(quantiles, targets, target_mask, kappa)


@functools.partial(jax.custom_vjp, nondiff_argnums=(3,))
def _quantile_huber_loss(quantiles, targets, target_mask, kappa):
    delta, weight, count = _quantile_huber_terms(quantiles, targets, target_mask, kappa)
    abs_delta = jnp.abs(delta)
    huber = jnp.where(abs_delta <= kappa, 0.5 * delta**2, kappa * (abs_delta - 0.5 * kappa))
    return jnp.sum(weight * huber) / (kappa * count)


def _quantile_huber_fwd(quantiles, targets, target_mask, kappa):
    return _quantile_huber_loss(quantiles, targets, target_mask, kappa), (quantiles, targets, target_mask)


def _quantile_huber_bwd(kappa, residuals, cotangent):
    quantiles, targets, target_mask = residuals
    delta, weight, count = _quantile_huber_terms(quantiles, targets, target_mask, kappa)
    d_delta = weight * jnp.clip(delta, -kappa, kappa) * (cotangent / (kappa * count))
    return -jnp.sum(d_delta, axis=-1), jnp.sum(d_delta, axis=(0, 2)), jnp.zeros_like(target_mask)


_quantile_huber_loss.defvjp(_quantile_huber_fwd, _quantile_huber_bwd)


def with_target(critic_loss_fn, target_fn=None):
    """``critic_loss_fn`` computing its TD target with ``target_fn`` (same signature as the agent's default target,
    e.g. ``sac.soft_td_target(state, batch, key, cfg)``) instead of its default: how ``make_update(target_fn=...)``
    swaps the target apart from the regression loss. A critic loss takes a target by its ``target_fn`` keyword
    (every built-in one does); None keeps ``critic_loss_fn`` as it is.

    ``target_fn`` may return ``(target, metrics)`` instead of the target alone: its metrics (a dict of scalars)
    join the critic loss's, e.g. how often a clipped target hit its bound."""
    import inspect

    if target_fn is None:
        return critic_loss_fn
    if "target_fn" not in inspect.signature(critic_loss_fn).parameters:
        name = getattr(critic_loss_fn, "__name__", repr(critic_loss_fn))
        raise TypeError(f"critic loss {name} takes no target_fn keyword, so target_fn= cannot reach it: give it a "
                        "`target_fn=<default target>` parameter and compute its target with it")

    @functools.wraps(critic_loss_fn)
    def critic_loss_with_target(params, *args, **kwargs):
        reported = {}

        def target_alone(*target_args, **target_kwargs):
            out = target_fn(*target_args, **target_kwargs)
            if isinstance(out, tuple) and len(out) == 2 and isinstance(out[1], dict):
                reported.update(out[1])
                return out[0]
            return out

        loss, aux = critic_loss_fn(params, *args, target_fn=target_alone, **kwargs)
        return loss, ({**aux, **jax.lax.stop_gradient(reported)} if reported else aux)

    return critic_loss_with_target
