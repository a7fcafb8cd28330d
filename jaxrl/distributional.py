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

    The same sum m_i = sum_k p_k max(0, 1 - |b_k - i|), b_k the atom's fractional bin index, in two forms chosen
    per backend when the program is lowered: on a CPU a scatter-add of each atom's two shares (B K work), on other
    backends one fused [B, K, M] expression (B K M work, no scatter: a GPU's scatter-add is atomic, so the order
    of its sums, and their last bits, would vary from run to run). On a 2-core CPU at FastSAC's and FastTD3's CPU
    batch (B = 1024, K = M = 101) the dense form took 12.7 ms and the scatter 0.7 ms: over half of their update.
    The two agree to float rounding, not bitwise (the dense form's dot accumulates in its own order).
    """
    return jax.lax.platform_dependent(atoms, probs, support, cpu=_scattered_projection, default=_dense_projection)


def _bin_position(atoms, support):
    """b_k: each atom's fractional index on the support, clipped into [0, M - 1]."""
    v_min, v_max, num_bins = support[0], support[-1], support.shape[0]
    return (jnp.clip(atoms, v_min, v_max) - v_min) / ((v_max - v_min) / (num_bins - 1))


def _dense_projection(atoms, probs, support):
    position = _bin_position(atoms, support)
    weight = jnp.clip(1.0 - jnp.abs(position[..., :, None] - jnp.arange(support.shape[0], dtype=atoms.dtype)),
                      0.0, 1.0)
    return jnp.einsum("...k,...km->...m", probs, weight)


def _scattered_projection(atoms, probs, support):
    leading = probs.shape[:probs.ndim - atoms.ndim]  # the critics' axes
    atoms_shape, atoms = atoms.shape, atoms.reshape(-1, atoms.shape[-1])
    probs = probs.reshape(leading + atoms.shape)
    position = _bin_position(atoms, support)
    lower = jnp.floor(position)
    rows = jnp.arange(atoms.shape[0])[:, None]
    projected = jnp.zeros(leading + atoms.shape[:1] + support.shape, probs.dtype)
    for bin_index in (lower + 1.0, lower):  # this order is the one the recorded fingerprints were made with
        share = jnp.clip(1.0 - jnp.abs(position - bin_index), 0.0, 1.0)
        # An atom on the last bin has no upper neighbour: index M is dropped (its share is 0). A NaN atom's
        # index converts to 0 and its NaN share lands there, so a NaN target stays NaN for the loss's check.
        projected = projected.at[..., rows, bin_index.astype(jnp.int32)].add(probs * share, mode="drop")
    return projected.reshape(leading + atoms_shape[:-1] + support.shape)


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
