"""Hyperspherical network blocks of SimbaV2 (Lee et al. 2025, arXiv 2502.15280; dojeon-ai/SimbaV2
`scale_rl/agents/simbaV2/`).

Features live on the unit sphere (``l2normalize`` after every block) and so do the weights: every
``HyperDense`` kernel is bias-free and, after each optimizer step, ``project_hyper_kernels`` renormalises each
output unit's weight vector to unit length. Magnitudes are carried only by ``Scaler`` vectors, whose raw
parameter lives at ``scale`` while the forward multiplier starts at ``init_value``; this decouples Adam's step size
from the multiplier's value. The blocks are agent-independent (usable for TD3 or TD-MPC2 variants).
"""
from __future__ import annotations

import math

import flax.linen as nn
import jax
import jax.numpy as jnp

EPS = 1e-8
HYPER_DENSE = "hyper_dense"  # module name that marks a kernel for projection


def l2normalize(x: jax.Array, axis: int = -1) -> jax.Array:
    """x / max(||x||_2, 1e-8) along ``axis``."""
    return x / jnp.maximum(jnp.linalg.norm(x, axis=axis, keepdims=True), EPS)


class Scaler(nn.Module):
    """x -> p * (init_value / scale) * x with a learnable vector p initialised to ``scale`` (the paper's
    init/scale; ``init`` would shadow flax's Module.init)."""

    dim: int
    init_value: float = 1.0
    scale: float = 1.0

    @nn.compact
    def __call__(self, x):
        p = self.param("scaler", nn.initializers.constant(self.scale), (self.dim,))
        return p * (self.init_value / self.scale) * x


class HyperDense(nn.Module):
    """Bias-free linear map, orthogonal init (official: gain 1, ``column_axis=0``), projected after each step."""

    features: int

    @nn.compact
    def __call__(self, x):
        return nn.Dense(self.features, use_bias=False, name=HYPER_DENSE,
                        kernel_init=nn.initializers.orthogonal(1.0, column_axis=0))(x)


class HyperEmbedder(nn.Module):
    """h0 = l2norm(s * W l2norm([x; c_shift])): the constant input keeps the input's norm information."""

    hidden_dim: int
    c_shift: float = 3.0

    @nn.compact
    def __call__(self, x):
        # The constant column from x itself (not jnp.full(x.shape...)): an ONNX export traces the batch axis as a
        # symbol, which jnp.full's shape argument cannot take.
        x = jnp.concatenate([x, jnp.ones_like(x[..., :1]) * self.c_shift], axis=-1)
        x = HyperDense(self.hidden_dim)(l2normalize(x))
        scale = math.sqrt(2.0 / self.hidden_dim)
        return l2normalize(Scaler(self.hidden_dim, scale, scale)(x))


class HyperMLP(nn.Module):
    """l2norm(W2 (relu(s * W1 x) + 1e-8)); the epsilon keeps the vector before l2norm away from zero."""

    hidden_dim: int
    out_dim: int
    scaler_init: float
    scaler_scale: float

    @nn.compact
    def __call__(self, x):
        x = Scaler(self.hidden_dim, self.scaler_init, self.scaler_scale)(HyperDense(self.hidden_dim)(x))
        return l2normalize(HyperDense(self.out_dim)(nn.relu(x) + EPS))


class HyperLERPBlock(nn.Module):
    """x <- l2norm(x + alpha * (mlp(x) - x)), alpha a Scaler (init 1/(L+1), scale 1/sqrt(h))."""

    hidden_dim: int
    num_blocks: int
    expansion: int = 4

    @nn.compact
    def __call__(self, x):
        scaler = math.sqrt(2.0 / self.hidden_dim) / math.sqrt(self.expansion)
        update = HyperMLP(self.hidden_dim * self.expansion, self.hidden_dim, scaler, scaler)(x)
        alpha = Scaler(self.hidden_dim, 1.0 / (self.num_blocks + 1), 1.0 / math.sqrt(self.hidden_dim))
        return l2normalize(x + alpha(update - x))


class HyperEncoder(nn.Module):
    """Embedder followed by ``num_blocks`` LERP blocks: a point on the unit sphere of dimension hidden_dim."""

    hidden_dim: int
    num_blocks: int
    c_shift: float = 3.0
    expansion: int = 4

    @nn.compact
    def __call__(self, x):
        x = HyperEmbedder(self.hidden_dim, self.c_shift)(x)
        for _ in range(self.num_blocks):
            x = HyperLERPBlock(self.hidden_dim, self.num_blocks, self.expansion)(x)
        return x


class HyperLinearHead(nn.Module):
    """W2 (s * W1 z) + b: two projected layers with only a Scaler (init = scale = 1) between them."""

    hidden_dim: int
    out_dim: int

    @nn.compact
    def __call__(self, z):
        z = Scaler(self.hidden_dim, 1.0, 1.0)(HyperDense(self.hidden_dim)(z))
        return HyperDense(self.out_dim)(z) + self.param("bias", nn.initializers.zeros, (self.out_dim,))


class HyperTanhGaussianActor(nn.Module):
    """(mean, log_std) of a tanh-Gaussian; log_std = min + (max - min)(1 + tanh(l)) / 2 in [-10, 2]."""

    hidden_dim: int
    num_blocks: int
    action_size: int
    c_shift: float = 3.0
    expansion: int = 4
    log_std_min: float = -10.0
    log_std_max: float = 2.0

    @nn.compact
    def __call__(self, obs):
        z = HyperEncoder(self.hidden_dim, self.num_blocks, self.c_shift, self.expansion)(obs)
        mean = HyperLinearHead(self.hidden_dim, self.action_size, name="mean_head")(z)
        raw = HyperLinearHead(self.hidden_dim, self.action_size, name="log_std_head")(z)
        log_std = self.log_std_min + (self.log_std_max - self.log_std_min) * 0.5 * (1.0 + jnp.tanh(raw))
        return mean, log_std


class HyperCategoricalCritic(nn.Module):
    """Log-probabilities [..., num_bins] of a categorical return distribution on a fixed support, from [s; a]."""

    hidden_dim: int
    num_blocks: int
    num_bins: int = 101
    c_shift: float = 3.0
    expansion: int = 4

    @nn.compact
    def __call__(self, obs, action):
        z = HyperEncoder(self.hidden_dim, self.num_blocks, self.c_shift, self.expansion)(
            jnp.concatenate([obs, action], axis=-1))
        return jax.nn.log_softmax(HyperLinearHead(self.hidden_dim, self.num_bins)(z), axis=-1)


class HyperCriticEnsemble(nn.Module):
    """``num_critics`` categorical critics as one vmapped computation: [num_critics, ..., num_bins]."""

    hidden_dim: int
    num_blocks: int
    num_critics: int = 1
    num_bins: int = 101
    c_shift: float = 3.0
    expansion: int = 4

    @nn.compact
    def __call__(self, obs, action):
        ensemble = nn.vmap(HyperCategoricalCritic, variable_axes={"params": 0}, split_rngs={"params": True},
                           in_axes=None, out_axes=0, axis_size=self.num_critics)
        return ensemble(self.hidden_dim, self.num_blocks, self.num_bins, self.c_shift, self.expansion)(obs, action)


def _is_hyper_kernel(path) -> bool:
    keys = [getattr(entry, "key", None) for entry in path]
    return len(keys) >= 2 and keys[-1] == "kernel" and keys[-2] == HYPER_DENSE


def project_hyper_kernels(params):
    """Every HyperDense kernel [..., in, out] renormalised so each output unit's column has unit L2 norm.

    A pure function of the parameter tree (apply it to the new parameters after every optimizer step); any
    leading ensemble axis is kept. Scalers, biases and the optimizer state are untouched.
    """
    return jax.tree_util.tree_map_with_path(
        lambda path, x: l2normalize(x, axis=-2) if _is_hyper_kernel(path) else x, params)


def hyper_kernel_norms(params) -> list[jax.Array]:
    """The column norms of every HyperDense kernel (for tests and diagnostics)."""
    leaves = jax.tree_util.tree_leaves_with_path(params)
    return [jnp.linalg.norm(x, axis=-2) for path, x in leaves if _is_hyper_kernel(path)]
