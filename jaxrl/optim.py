"""Optimisation: the one gradient step every agent takes for each of its networks."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import flax.struct
import jax
import optax

from jaxrl.agent import added_field


class GradientStep(NamedTuple):
    params: Any  # after the optimizer step
    opt_state: Any
    aux: Any  # what the loss returned beside its value (its metrics, and what later losses reuse)
    grad_norm: jax.Array  # global L2 norm of the gradient, before the optimizer (clipping included) sees it
    grads: Any = None  # the gradient itself (ACE's dormancy reads it; unused, jit drops it)


# The key of a loss's aux under which it returns its network's updated mutable collections (batch statistics):
# ``gradient_step`` takes it out of the aux and writes it into the new variables. Losses of networks without
# mutable collections leave it out (or return {}).
NETWORK_STATE = "network_state"


def network_state(statistics: dict) -> dict:
    """``{NETWORK_STATE: statistics}`` for a loss's aux when the training pass returned statistics, else {} (plain
    networks: the aux, and so the metrics of code that reads it directly, stay as they were)."""
    return {NETWORK_STATE: statistics} if statistics else {}


LR_SCHEDULES = ("constant", "linear", "cosine")


@flax.struct.dataclass
class OptimizerConfig:
    """The optimiser settings beyond learning rates, shared by every built-in agent: each agent's ``Config``
    subclasses it (so these fields come first in its fields and on its command line, ``--sac.adam-b1``), and its
    ``optimizers`` builds them into every network's optax chain with ``adam``. An agent whose official code sets
    one otherwise redeclares it with its own default (FastTD3's weight decay 0.1, CrossQ's beta1 0.5); at the
    defaults every chain is ``optax.adam(lr)`` exactly, so optimizer states and numbers stay as they were."""

    adam_b1: float = added_field(0.9)
    """Adam's beta1 (every network of the agent unless its docs say otherwise)"""
    adam_b2: float = added_field(0.999)
    """Adam's beta2"""
    adam_eps: float = added_field(1e-8)
    """Adam's epsilon"""
    weight_decay: float = added_field(0.0)
    """decoupled weight decay (AdamW) of the actor and the critics when > 0 (never of a temperature)"""
    max_grad_norm: float | None = added_field(None)
    """clip each network's gradient to this global norm before Adam; None: no clipping"""
    lr_schedule: str = added_field("constant")
    """every learning rate times a factor of the run's progress in updates: constant, linear (to 0) or cosine
    (to 0)"""


def _traced_field(cfg, name: str) -> bool:
    """Whether ``cfg.<name>`` is a pytree leaf of its Config (a swept, possibly traced number) rather than static."""
    fields = {f.name: f for f in dataclasses.fields(cfg)} if dataclasses.is_dataclass(cfg) else {}
    return name in fields and fields[name].metadata.get("pytree_node", True)


def schedule_factor(cfg, progress=None):
    """The learning-rate factor of ``cfg.lr_schedule`` (absent: constant) at ``progress`` (the state's
    ``jaxrl.progress.Progress``; None: 1): 1 - f for linear, (1 + cos(pi f)) / 2 for cosine, f the fraction of
    the run's planned updates done."""
    import jax.numpy as jnp

    schedule = getattr(cfg, "lr_schedule", "constant")
    if schedule == "constant" or progress is None:
        return 1.0
    done = progress.update_fraction
    return 1.0 - done if schedule == "linear" else 0.5 * (1.0 + jnp.cos(jnp.pi * done))


def adam(cfg, learning_rate, progress=None, weight_decay=True, **fixed) -> optax.GradientTransformation:
    """Adam for one network from the optimiser fields of ``cfg`` (``OptimizerConfig``), each absent one at its
    default, so an agent declares only those it offers: ``adam_b1`` (0.9), ``adam_b2`` (0.999), ``adam_eps``
    (1e-8), ``weight_decay`` (0.0: AdamW's decoupled decay when > 0, or always AdamW when the field is a swept
    number), ``max_grad_norm`` (None; else the gradient is clipped to that global norm first) and ``lr_schedule``
    ("constant"; "linear" or "cosine" from the learning rate to 0 over the run's planned updates, read from
    ``progress``: without it the rate is constant). ``learning_rate`` may itself be an optax schedule (SimbaV2's
    decay), which the factor then multiplies. ``weight_decay``: True reads the field, False means none (a
    temperature), a number is this network's own (FastSAC's temperature). ``fixed``: settings this network keeps
    whatever ``cfg`` says (``adam_b1=0.9``: CrossQ's temperature). At the defaults this is
    ``optax.adam(learning_rate)`` exactly, so optimizer states keep their layout."""
    settings = {name: fixed[name] if name in fixed else getattr(cfg, name, default) for name, default in
                (("adam_b1", 0.9), ("adam_b2", 0.999), ("adam_eps", 1e-8), ("max_grad_norm", None))}
    factor = schedule_factor(cfg, progress)
    if not (isinstance(factor, float) and factor == 1.0):
        learning_rate = ((lambda count, rate=learning_rate: rate(count) * factor) if callable(learning_rate)
                         else learning_rate * factor)
    if isinstance(weight_decay, bool):
        decay = getattr(cfg, "weight_decay", 0.0) if weight_decay else 0.0
        adamw = weight_decay and _traced_field(cfg, "weight_decay") or not _is_zero(decay)
    else:
        decay, adamw = weight_decay, True
    b1, b2, eps = settings["adam_b1"], settings["adam_b2"], settings["adam_eps"]
    optimizer = (optax.adamw(learning_rate, b1=b1, b2=b2, eps=eps, weight_decay=decay) if adamw
                 else optax.adam(learning_rate, b1=b1, b2=b2, eps=eps))
    clip = settings["max_grad_norm"]
    return optimizer if clip is None else optax.chain(optax.clip_by_global_norm(clip), optimizer)


def _is_zero(value) -> bool:
    """Whether a static setting is exactly 0 (a traced number is not: AdamW then, whatever its value)."""
    try:
        return float(value) == 0.0
    except (TypeError, jax.errors.ConcretizationTypeError):
        return False


def collections_of(variables) -> dict:
    """A Flax network's mutable collections (e.g. ``batch_stats``): every collection of ``variables`` but
    ``params``; {} for plain networks and for parameters that are not a Flax variables dict."""
    if isinstance(variables, Mapping) and "params" in variables:
        return {name: value for name, value in variables.items() if name != "params"}
    return {}


def trainable(variables):
    """What the optimizer moves: ``{"params": ...}`` of a network that also has mutable collections, else
    ``variables`` as they are (so plain networks' optimizer states keep their layout). Build optimizer states
    with it: ``optimizer.init(trainable(critic_params))``."""
    return {"params": variables["params"]} if collections_of(variables) else variables


def gradient_step(loss_fn: Callable, params, opt_state, optimizer: optax.GradientTransformation, *args
                  ) -> GradientStep:
    """Differentiate ``loss_fn(params, *args) -> (loss, aux)`` w.r.t. ``params`` and take one optimizer step.

    The caller decides when the new params enter its state, so an agent whose losses must all see the old
    parameters (TQC, DSAC-T) takes every step first and writes them afterwards.

    A network with mutable collections (``params`` is ``{"params": ..., "batch_stats": ...}``): only
    ``trainable(params)`` is differentiated and moved (its optimizer state is built on it), and the collections
    the loss returns as ``aux[NETWORK_STATE]`` (``jaxrl.networks.forward``'s second output of its training pass)
    replace the old ones in the new variables: running statistics move exactly once per gradient step of their
    network, and never reach the metrics.
    """
    collections = collections_of(params)
    if collections:
        grads, aux = jax.grad(lambda p, *a: loss_fn({**p, **collections}, *a), has_aux=True)(trainable(params),
                                                                                           *args)
    else:
        grads, aux = jax.grad(loss_fn, has_aux=True)(params, *args)
    network_state = aux.pop(NETWORK_STATE, None) if isinstance(aux, dict) else None
    updates, opt_state = optimizer.update(grads, opt_state, trainable(params))
    new_params = optax.apply_updates(trainable(params), updates)
    if network_state:
        unknown = set(network_state) - set(collections)
        if unknown:
            raise TypeError(f"the loss returned aux[{NETWORK_STATE!r}] with collection(s) {sorted(unknown)} that its "
                            f"network's variables do not have (they have {sorted(collections) or 'none'})")
    if collections:
        new_params = {**new_params, **collections, **(network_state or {})}
    return GradientStep(new_params, opt_state, aux, optax.tree.norm(grads), grads)


def grad_norm_metrics(**steps: GradientStep) -> dict[str, jax.Array]:
    """``{"grad_norm/<network>": norm}`` for an update's metrics: ``grad_norm_metrics(critic=..., actor=...)``."""
    return {f"grad_norm/{network}": step.grad_norm for network, step in steps.items()}


def official_delayed_turn(num_updates, policy_delay: int):
    """Whether update number ``num_updates`` (1-based, counted over the run) steps a delayed network: FastTD3's and
    FastSAC's ``i % policy_frequency == 1`` over each batched step's updates i = 0, 1, ... when that count is a
    multiple of ``policy_delay`` (both official codes), e.g. updates 2, 6, 10, ... for a delay of 4."""
    return (num_updates - 1) % policy_delay == 1 % policy_delay


def every_nth(num_updates, period: int):
    """Whether update number ``num_updates`` (1-based, counted after it is added) is a delayed network's turn: the
    TD3 paper's ``total_it % policy_freq == 0`` (updates d, 2d, ...)."""
    return num_updates % period == 0


def delayed_step(turn, step_fn, state, last_metrics_field: str = "last_actor_metrics"):
    """A network that moves every d-th update (TD3's delayed actor, REDQ's actor and temperature): where ``turn``
    (a traced bool: ``every_nth`` or ``official_delayed_turn``) holds, ``step_fn(state) -> (state, metrics)`` runs
    and its metrics are kept in ``state.<last_metrics_field>``. Returns (state, the kept metrics): the updates in
    between repeat the last step's values, so a chunk's mean weighs them like the official code's logs."""
    kept = getattr(state, last_metrics_field)
    reported = jax.eval_shape(step_fn, state)[1]
    if set(reported) != set(kept):
        raise TypeError(f"the delayed step reports metrics {sorted(reported)} but the state keeps "
                        f"{sorted(kept)} in {last_metrics_field}: init must list the same names (jaxrl.agent."
                        "delay_fields)")

    def run(state):
        state, metrics = step_fn(state)
        return state.replace(**{last_metrics_field: {name: metrics[name] for name in kept}})

    state = jax.lax.cond(turn, run, lambda s: s, state)
    return state, getattr(state, last_metrics_field)
