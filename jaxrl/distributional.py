"""Distributional critics on an evenly spaced support: the C51 projection (SimbaV2's critic, FastTD3's and
FastSAC's C51 critics and TD-MPC2's two-hot regression use it), the C51 TD target, expected values and the
cross-entropy loss."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxrl.losses import td_target


def categorical_projection(atoms, probs, support):
    """Project mass ``probs`` [..., B, K] sitting at ``atoms`` [B, K] onto the evenly spaced ``support`` [M] (C51,
    Bellemare et al. 2017, Alg. 1): atoms are clipped into the support, and each atom's mass is split between
    its two neighbouring bins in proportion to closeness (all of it to one bin when it sits exactly on it).
    Leading axes of ``probs`` (one per critic) share the atoms' weights.

    Written as m_i = sum_k p_k max(0, 1 - |b_k - i|) with b_k the atom's fractional bin index: the floor/ceil
    rule without scatter, one fused [B, K, M] expression.
    """
    v_min, v_max, num_bins = support[0], support[-1], support.shape[0]
    position = (jnp.clip(atoms, v_min, v_max) - v_min) / ((v_max - v_min) / (num_bins - 1))
    weight = jnp.clip(1.0 - jnp.abs(position[..., :, None] - jnp.arange(num_bins, dtype=atoms.dtype)), 0.0, 1.0)
    return jnp.einsum("...k,...km->...m", probs, weight)


def expected_value(probs, support):
    """Q = sum_j p_j z_j over the last axis."""
    return jnp.sum(probs * support, axis=-1)


def c51_target(batch, next_probs, support, next_shift=None):
    """The C51 target distribution(s): the next distribution ``next_probs`` [..., B, M] moved to the atoms
    r + discount (1 - terminated)(z_j - next_shift) (``jaxrl.losses.td_target``: gamma^m for n-step transitions,
    time limits bootstrap) and projected back onto ``support`` [M]. ``next_shift`` [B] is the soft value's
    alpha log pi(a'|s') for SAC-style targets, None for TD3-style ones. No gradient flows through it."""
    values = jnp.broadcast_to(support, batch.reward.shape + support.shape)
    if next_shift is not None:
        values = values - next_shift[:, None]
    return jax.lax.stop_gradient(categorical_projection(td_target(batch, values), next_probs, support))


def categorical_cross_entropy(target_probs, logits):
    """-sum_j m_j log softmax(logits)_j over the last axis, per sample (C51's loss)."""
    return -jnp.sum(target_probs * jax.nn.log_softmax(logits, axis=-1), axis=-1)
