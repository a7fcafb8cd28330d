"""Optimisation: the one gradient step every agent takes for each of its networks."""
from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import jax
import optax


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


def adam(cfg, learning_rate, progress=None, weight_decay: bool = True) -> optax.GradientTransformation:
    """Adam for one network from the optimiser fields of ``cfg``, each absent one at its default (so an agent
    declares only those it offers): ``adam_b1`` (0.9), ``adam_b2`` (0.999), ``adam_eps`` (1e-8), ``weight_decay``
    (0.0; AdamW's decoupled decay when > 0 and ``weight_decay`` is True for this network, as it is not for a
    temperature), ``max_grad_norm`` (None; else the gradient is clipped to that global norm first) and
    ``lr_schedule`` ("constant"; "linear" or "cosine" from the learning rate to 0 over the run's planned updates,
    read from ``progress``, the state's ``jaxrl.progress.Progress``: without it the rate is constant). At the
    defaults it is ``optax.adam(learning_rate)`` exactly, so optimizer states keep their layout."""
    import jax.numpy as jnp

    schedule = getattr(cfg, "lr_schedule", "constant")
    if schedule != "constant" and progress is not None:
        done = progress.update_fraction
        factor = 1.0 - done if schedule == "linear" else 0.5 * (1.0 + jnp.cos(jnp.pi * done))
        learning_rate = learning_rate * factor
    b1, b2, eps = getattr(cfg, "adam_b1", 0.9), getattr(cfg, "adam_b2", 0.999), getattr(cfg, "adam_eps", 1e-8)
    decay = getattr(cfg, "weight_decay", 0.0) if weight_decay else 0.0
    optimizer = (optax.adamw(learning_rate, b1=b1, b2=b2, eps=eps, weight_decay=decay) if decay > 0
                 else optax.adam(learning_rate, b1=b1, b2=b2, eps=eps))
    clip = getattr(cfg, "max_grad_norm", None)
    return optimizer if clip is None else optax.chain(optax.clip_by_global_norm(clip), optimizer)


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
