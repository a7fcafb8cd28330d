"""Networks shared by the agents: MLPs, critic ensembles (vmap over parameters), the tanh-Gaussian policy, and the
wrapper that makes any of them read one part of a structured observation (asymmetric actor-critic)."""
from __future__ import annotations

import functools
import inspect
import math
from collections.abc import Callable, Mapping, Sequence

import flax.linen as nn
import jax
import jax.numpy as jnp

# "gelu" is PyTorch's exact x * Phi(x) (torch.nn.GELU(), DSAC-T's official networks); Flax's nn.gelu defaults to
# the tanh approximation, available here as "gelu_tanh".
ACTIVATIONS: dict[str, Callable] = {"relu": nn.relu, "elu": nn.elu,
                                    "gelu": functools.partial(nn.gelu, approximate=False), "gelu_tanh": nn.gelu,
                                    "mish": jax.nn.mish, "silu": nn.silu, "tanh": jnp.tanh}


@functools.cache
def _call_takes_train(module_type: type) -> bool:
    return "train" in inspect.signature(module_type.__call__).parameters


def _takes_train(module: nn.Module) -> bool:
    while isinstance(module, ReadsPart):  # passes its keyword arguments on to the network it wraps
        module = module.inner
    return _call_takes_train(type(module))


def forward(module: nn.Module, variables, *inputs, train: bool = False, key: jax.Array | None = None):
    """One pass of ``module`` over ``inputs``: ``(outputs, new_collections)``.

    ``train=True`` is the training pass: dropout is on (drawing from ``key``), normalisation layers with running
    statistics (``BatchRenorm``) use this batch's and update them, and ``new_collections`` holds the updated
    collections (``{"batch_stats": ...}``), which a loss returns as ``aux[jaxrl.optim.NETWORK_STATE]`` for its
    gradient step to write back. ``train=False`` (inference: acting, evaluation, a frozen critic inside another
    network's loss) changes nothing and returns ``{}``. Plain MLPs give the same outputs either way; a module whose
    ``__call__`` takes no ``train`` argument is called without it."""
    has_collections = isinstance(variables, Mapping) and any(name != "params" for name in variables)
    kwargs = {"train": train} if _takes_train(module) else {}
    rngs = {"dropout": key} if train and key is not None else None
    if train and has_collections:
        outputs, new = module.apply(variables, *inputs, rngs=rngs, mutable=[n for n in variables if n != "params"],
                                    **kwargs)
        return outputs, dict(new)
    return module.apply(variables, *inputs, rngs=rngs, **kwargs), {}


def select_part(obs, part: str | None):
    """``obs[part]`` of a structured observation; a flat observation (or an already selected part) as it is."""
    return obs[part] if part is not None and isinstance(obs, Mapping) else obs


class ReadsPart(nn.Module):
    """``inner`` applied with its first argument replaced by one part of a structured observation."""

    inner: nn.Module
    part: str

    def __call__(self, obs, *args, **kwargs):
        return self.inner(select_part(obs, self.part), *args, **kwargs)


def reading(part: str | None, module: nn.Module) -> nn.Module:
    """``module`` reading observation part ``part`` (``EnvSpec.actor_obs`` / ``critic_obs``); with ``part`` None
    (flat observations) the module itself, so flat runs keep their parameter trees exactly."""
    return module if part is None else ReadsPart(module, part)


class BatchRenorm(nn.Module):
    """Batch Renormalization (Ioffe, NeurIPS 2017) as CrossQ's official code has it (adityab/CrossQ a318a26,
    ``sbx/sac/policies.py``; SBX's ``BatchRenorm`` is the same), over the last axis.

    Training pass (``train=True``): with the batch's mean mu_B and biased variance var_B (over every axis but the
    last), and the running mean mu and variance var,
        r = clip(sqrt(var_B + eps) / sqrt(var + eps), 1 / r_max, r_max)
        d = clip((mu_B - mu) / sqrt(var + eps), -d_max, d_max)
        y = scale * (x - mean') / sqrt(var' + eps) + bias,  mean' = mu_B - d sqrt(var_B) / r,  var' = var_B / r^2
    which is scale * ((x - mu_B) / sigma_B * r + d) + bias up to eps
    with r and d constants to the gradient (``stop_gradient``); gradients flow through mu_B and var_B. For the
    layer's first ``warmup_steps`` training passes r = 1, d = 0 (plain batch norm: the official code's hard switch,
    not the paper's gradual relaxation of r_max and d_max) while the running statistics settle. Every training pass
    moves the running statistics, warm-up included: mu <- m mu + (1 - m) mu_B, var <- m var + (1 - m) var_B.
    Inference (``train=False``): y = scale * (x - mu) / sqrt(var + eps) + bias, nothing moves.

    The running statistics and the pass counter live in the ``batch_stats`` collection (``jaxrl.networks.forward``
    returns them, ``jaxrl.optim.gradient_step`` writes them back). Departure, same values: sqrt(var_B) is taken as
    0 with a zero gradient where var_B is exactly 0 (a unit dead over the whole batch), where the official
    expression's gradient is 0 * inf = NaN; and r_max, d_max are module constants, not variables.
    """

    momentum: float = 0.99
    epsilon: float = 1e-3
    r_max: float = 3.0
    d_max: float = 5.0
    warmup_steps: int = 100_000

    @nn.compact
    def __call__(self, x, train: bool = False):
        features = x.shape[-1]
        running_mean = self.variable("batch_stats", "mean", lambda: jnp.zeros((features,), jnp.float32))
        running_var = self.variable("batch_stats", "var", lambda: jnp.ones((features,), jnp.float32))
        steps = self.variable("batch_stats", "steps", lambda: jnp.zeros((), jnp.int32))
        scale = self.param("scale", nn.initializers.ones, (features,))
        bias = self.param("bias", nn.initializers.zeros, (features,))
        if not train:
            mean, var = running_mean.value, running_var.value
        else:
            axes = tuple(range(x.ndim - 1))
            mean = jnp.mean(x, axis=axes)
            var = jnp.maximum(0.0, jnp.mean(jnp.square(x), axis=axes) - jnp.square(mean))  # flax's fast variance
            if not self.is_initializing():
                running_std = jnp.sqrt(running_var.value + self.epsilon)
                r = jax.lax.stop_gradient(jnp.clip(jnp.sqrt(var + self.epsilon) / running_std, 1.0 / self.r_max,
                                                   self.r_max))
                d = jax.lax.stop_gradient(jnp.clip((mean - running_mean.value) / running_std, -self.d_max,
                                                   self.d_max))
                positive = var > 0
                batch_std = jnp.where(positive, jnp.sqrt(jnp.where(positive, var, 1.0)), 0.0)
                warmed_up = steps.value >= self.warmup_steps
                renormed_mean, renormed_var = mean - d * batch_std / r, var / jnp.square(r)
                running_mean.value = self.momentum * running_mean.value + (1.0 - self.momentum) * mean
                running_var.value = self.momentum * running_var.value + (1.0 - self.momentum) * var
                steps.value = steps.value + 1
                mean = jnp.where(warmed_up, renormed_mean, mean)
                var = jnp.where(warmed_up, renormed_var, var)
        return (x - mean) * jax.lax.rsqrt(var + self.epsilon) * scale + bias


class MLP(nn.Module):
    """Dense layers with an activation (then, optionally, LayerNorm) between them; the last layer is linear.

    LayerNorm comes after the activation, as in ``brax.training.networks.MLP`` (Dense -> act -> LN), whose
    ``layer_norm`` option Playground's DMC SAC config turns on. ``output_kernel_init`` (default: ``kernel_init``)
    initialises the last layer alone (FastTD3's actor draws it from N(0, 0.01^2) so first actions are near 0).
    ``dropout_rate`` > 0 adds dropout right after each hidden Dense (DroQ: Dense -> Dropout -> LayerNorm -> act, with
    ``layer_norm_first``), active in training passes only (``train``; ``jaxrl.networks.forward``)."""

    hidden_sizes: Sequence[int]
    output_size: int
    activation: str = "relu"
    layer_norm: bool = False
    kernel_init: Callable = nn.initializers.lecun_uniform()
    output_kernel_init: Callable | None = None
    layer_norm_first: bool = False  # Dense -> LN -> act instead (holosoma's FastSAC networks)
    layer_norm_epsilon: float = 1e-6  # flax's default; PyTorch's (holosoma's) is 1e-5
    dropout_rate: float = 0.0
    batch_renorm_momentum: float | None = None  # CrossQ's Batch Renormalization with this momentum; None: none
    batch_renorm_warmup: int = 100_000

    @nn.compact
    def __call__(self, x, train: bool = False):
        act = ACTIVATIONS[self.activation]

        def renorm(y):
            if self.batch_renorm_momentum is None:
                return y
            return BatchRenorm(self.batch_renorm_momentum, warmup_steps=self.batch_renorm_warmup)(y, train)

        x = renorm(x)  # CrossQ: BRN on the input, then after each hidden activation
        for width in self.hidden_sizes:
            x = nn.Dense(width, kernel_init=self.kernel_init)(x)
            if self.dropout_rate > 0:
                x = nn.Dropout(self.dropout_rate)(x, deterministic=not train)
            if self.layer_norm and self.layer_norm_first:
                x = act(nn.LayerNorm(epsilon=self.layer_norm_epsilon)(x))
            elif self.layer_norm:
                x = nn.LayerNorm(epsilon=self.layer_norm_epsilon)(act(x))
            else:
                x = act(x)
            x = renorm(x)
        return nn.Dense(self.output_size, kernel_init=self.output_kernel_init or self.kernel_init)(x)


class QNetwork(nn.Module):
    """Q(s, a) -> [..., output_size] (output_size 1 for a scalar critic, >1 for quantiles/atoms)."""

    hidden_sizes: Sequence[int]
    output_size: int = 1
    activation: str = "relu"
    layer_norm: bool = False
    layer_norm_first: bool = False
    layer_norm_epsilon: float = 1e-6
    dropout_rate: float = 0.0
    batch_renorm_momentum: float | None = None
    batch_renorm_warmup: int = 100_000
    kernel_init: Callable = nn.initializers.lecun_uniform()

    @nn.compact
    def __call__(self, obs, action, train: bool = False):
        x = jnp.concatenate([obs, action], axis=-1)
        return MLP(self.hidden_sizes, self.output_size, self.activation, self.layer_norm,
                   kernel_init=self.kernel_init, layer_norm_first=self.layer_norm_first,
                   layer_norm_epsilon=self.layer_norm_epsilon, dropout_rate=self.dropout_rate,
                   batch_renorm_momentum=self.batch_renorm_momentum,
                   batch_renorm_warmup=self.batch_renorm_warmup)(x, train)


class CriticEnsemble(nn.Module):
    """``num_critics`` independent Q-networks evaluated as one batched computation.

    Parameters carry a leading ensemble axis; ``nn.vmap`` turns the critics' matmuls into batched matmuls
    instead of ``num_critics`` separate programs. Output: [num_critics, ..., output_size]. Each critic has its own
    batch statistics and dropout masks.
    """

    hidden_sizes: Sequence[int]
    num_critics: int = 2
    output_size: int = 1
    activation: str = "relu"
    layer_norm: bool = False
    layer_norm_first: bool = False
    layer_norm_epsilon: float = 1e-6
    dropout_rate: float = 0.0
    batch_renorm_momentum: float | None = None
    batch_renorm_warmup: int = 100_000
    kernel_init: Callable = nn.initializers.lecun_uniform()

    @nn.compact
    def __call__(self, obs, action, train: bool = False):
        ensemble = nn.vmap(
            QNetwork,
            variable_axes={"params": 0, "batch_stats": 0},
            split_rngs={"params": True, "dropout": True},
            in_axes=None,
            out_axes=0,
            axis_size=self.num_critics,
        )
        critic = ensemble(self.hidden_sizes, self.output_size, self.activation, self.layer_norm,
                          self.layer_norm_first, self.layer_norm_epsilon, self.dropout_rate,
                          self.batch_renorm_momentum, self.batch_renorm_warmup, self.kernel_init)
        return critic(obs, action, train)  # ``train`` positionally: nn.vmap ignores keyword arguments


class GaussianPolicyHead(nn.Module):
    """MLP trunk producing (mean, log_std) of a Gaussian in pre-tanh space.

    With ``squash_log_std`` (CleanRL) log_std is mapped smoothly into [log_std_min, log_std_max] as
    min + (max - min) * (tanh(x) + 1) / 2, so its gradient never vanishes at a hard clip; without it, it is
    clipped (softlearning, TQC).
    """

    hidden_sizes: Sequence[int]
    action_size: int
    activation: str = "relu"
    log_std_min: float = -5.0
    log_std_max: float = 2.0
    squash_log_std: bool = True
    layer_norm: bool = False
    layer_norm_first: bool = False
    output_kernel_init: Callable | None = None
    layer_norm_epsilon: float = 1e-6
    batch_renorm_momentum: float | None = None
    batch_renorm_warmup: int = 100_000
    kernel_init: Callable = nn.initializers.lecun_uniform()

    @nn.compact
    def __call__(self, obs, train: bool = False):
        out = MLP(self.hidden_sizes, 2 * self.action_size, self.activation, self.layer_norm, self.kernel_init,
                  output_kernel_init=self.output_kernel_init, layer_norm_first=self.layer_norm_first,
                  layer_norm_epsilon=self.layer_norm_epsilon, batch_renorm_momentum=self.batch_renorm_momentum,
                  batch_renorm_warmup=self.batch_renorm_warmup)(obs, train)
        mean, raw_log_std = jnp.split(out, 2, axis=-1)
        if not self.squash_log_std:
            return mean, jnp.clip(raw_log_std, self.log_std_min, self.log_std_max)
        log_std = self.log_std_min + 0.5 * (self.log_std_max - self.log_std_min) * (jnp.tanh(raw_log_std) + 1.0)
        return mean, log_std


def tanh_log_det_jacobian(u: jax.Array, epsilon: float | None = None) -> jax.Array:
    """log(1 - tanh(u)^2), elementwise: exact and stable as 2 (log 2 - u - softplus(-2u)) with ``epsilon`` None;
    else log(1 - tanh(u)^2 + epsilon), the form of most PyTorch code (holosoma's FastSAC: epsilon 1e-6), which
    stops falling at log(epsilon) where actions saturate (0.26 nats above the exact value at |u| = 7, 4.8 at 10)."""
    if epsilon is None:
        return 2.0 * (math.log(2.0) - u - jax.nn.softplus(-2.0 * u))
    return jnp.log(1.0 - jnp.square(jnp.tanh(u)) + epsilon)


def tanh_gaussian_log_prob_per_dim(u: jax.Array, mean: jax.Array, log_std: jax.Array, epsilon: float | None = None
                                   ) -> jax.Array:
    """Each action dimension's term of ``tanh_gaussian_log_prob`` (its Gaussian density and its own Jacobian term),
    unsummed: ACE weighs them."""
    gaussian = -0.5 * jnp.square((u - mean) / jnp.exp(log_std)) - log_std - 0.5 * math.log(2.0 * math.pi)
    return gaussian - tanh_log_det_jacobian(u, epsilon)


def tanh_gaussian_log_prob(u: jax.Array, mean: jax.Array, log_std: jax.Array, epsilon: float | None = None
                           ) -> jax.Array:
    """log pi(tanh(u)) for u ~ N(mean, exp(log_std)^2), summed over the last axis (change of variables; ``epsilon``:
    ``tanh_log_det_jacobian``'s)."""
    return jnp.sum(tanh_gaussian_log_prob_per_dim(u, mean, log_std, epsilon), axis=-1)


def sample_tanh_gaussian(key: jax.Array, mean: jax.Array, log_std: jax.Array, epsilon: float | None = None
                         ) -> tuple[jax.Array, jax.Array]:
    """Reparameterised sample a = tanh(mean + std * eps) and its log-probability (``epsilon``:
    ``tanh_log_det_jacobian``'s)."""
    u = mean + jnp.exp(log_std) * jax.random.normal(key, mean.shape, mean.dtype)
    return jnp.tanh(u), tanh_gaussian_log_prob(u, mean, log_std, epsilon)


def tanh_gaussian_act(actor: nn.Module, params, obs, key, deterministic: bool):
    """Act with a tanh-Gaussian policy head: tanh(mean) when deterministic, else a sample."""
    mean, log_std = actor.apply(params, obs)
    if deterministic:
        return jnp.tanh(mean)
    return sample_tanh_gaussian(key, mean, log_std)[0]


def orthogonal_init(scale: float = 1.0):
    """``jax.nn.initializers.orthogonal``'s distribution without a LAPACK QR, for kernels re-initialised inside a
    compiled program. The Q of a Gaussian matrix's QR with R's diagonal positive is Haar-distributed; classical
    Gram-Schmidt, column by column and twice ("twice is enough" for float32 orthogonality), builds exactly that Q
    from matrix products. Why not ``jnp.linalg.qr``: on XLA:CPU a QR vmapped inside a large program left it waiting
    with every thread idle (ACE's soft reset over three sweep members on dmc/FingerSpin; ``jaxrl.loop.init_state``
    describes the same hang at SimbaV2's init)."""

    def init(key, shape, dtype=jnp.float32):
        rows, cols = math.prod(shape[:-1]), shape[-1]
        gaussian = jax.random.normal(key, (max(rows, cols), min(rows, cols)), dtype)

        def column(j, q):
            v = jax.lax.dynamic_index_in_dim(gaussian, j, axis=1, keepdims=False)
            for _ in range(2):  # the columns not yet written are zero: they project nothing out
                v = v - q @ (q.T @ v)
            return jax.lax.dynamic_update_index_in_dim(q, v / jnp.linalg.norm(v), j, axis=1)

        q = jax.lax.fori_loop(0, gaussian.shape[1], column, jnp.zeros_like(gaussian))
        return scale * (q.T if rows < cols else q).reshape(shape)

    return init


def simnorm(x: jax.Array, group_size: int = 8) -> jax.Array:
    """Simplicial normalisation (TD-MPC2): softmax within consecutive groups of ``group_size`` features."""
    groups = x.reshape(x.shape[:-1] + (x.shape[-1] // group_size, group_size))
    return jax.nn.softmax(groups, axis=-1).reshape(x.shape)
