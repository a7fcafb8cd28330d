"""Distributional projections: mass on arbitrary atoms -> an evenly spaced support (C51; SimbaV2's critic and
TD-MPC2's two-hot regression both use it)."""
from __future__ import annotations

import jax.numpy as jnp


def categorical_projection(atoms, probs, support):
    """Project mass ``probs`` [B, K] sitting at ``atoms`` [B, K] onto the evenly spaced ``support`` [M] (C51,
    Bellemare et al. 2017, Alg. 1): atoms are clipped into the support, and each atom's mass is split between
    its two neighbouring bins in proportion to closeness (all of it to one bin when it sits exactly on it).

    Written as m_i = sum_k p_k max(0, 1 - |b_k - i|) with b_k the atom's fractional bin index: the floor/ceil
    rule without scatter, one fused [B, K, M] expression.
    """
    v_min, v_max, num_bins = support[0], support[-1], support.shape[0]
    position = (jnp.clip(atoms, v_min, v_max) - v_min) / ((v_max - v_min) / (num_bins - 1))
    weight = jnp.clip(1.0 - jnp.abs(position[..., :, None] - jnp.arange(num_bins, dtype=atoms.dtype)), 0.0, 1.0)
    return jnp.einsum("bk,bkm->bm", probs, weight)
