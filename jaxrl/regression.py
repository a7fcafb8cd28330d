"""Discrete regression of scalars (TD-MPC2, Hansen et al. 2024; DreamerV3): symlog space, two-hot targets on a
fixed bin grid, soft cross-entropy, and the read-out back to a scalar (nicklashansen/tdmpc2
`tdmpc2/common/math.py`: ``two_hot``, ``soft_ce``, ``two_hot_inv``)."""
from __future__ import annotations

import jax
import jax.numpy as jnp

from jaxrl.distributional import categorical_projection


def symlog(x):
    """sign(x) log(1 + |x|)."""
    return jnp.sign(x) * jnp.log1p(jnp.abs(x))


def symexp(x):
    """sign(x) (exp(|x|) - 1), the inverse of symlog."""
    return jnp.sign(x) * jnp.expm1(jnp.abs(x))


def bins(num_bins: int = 101, v_min: float = -10.0, v_max: float = 10.0):
    """The fixed grid in symlog space (default: 101 bins of size 0.2 on [-10, 10])."""
    return jnp.linspace(v_min, v_max, num_bins)


def two_hot(y, grid):
    """[..., num_bins] weights 1 - frac and frac on the two bins around symlog(y), clamped to the grid.

    The same split as C51's projection of a single atom of mass 1, so it reuses ``categorical_projection``.
    """
    flat = symlog(jnp.reshape(y, (-1, 1)))
    weights = categorical_projection(flat, jnp.ones_like(flat), grid)
    return jnp.reshape(weights, jnp.shape(y) + (grid.shape[0],))


def two_hot_inverse(logits, grid):
    """symexp(sum_j softmax(logits)_j grid_j): the scalar a distribution over the grid stands for."""
    return symexp(jnp.sum(jax.nn.softmax(logits, axis=-1) * grid, axis=-1))


def soft_cross_entropy(logits, target_weights):
    """-sum_j w_j log softmax(logits)_j over the last axis."""
    return -jnp.sum(target_weights * jax.nn.log_softmax(logits, axis=-1), axis=-1)
