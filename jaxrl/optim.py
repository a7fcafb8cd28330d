"""Optimisation: the one gradient step every agent takes for each of its networks."""
from __future__ import annotations

from collections.abc import Callable
from typing import Any, NamedTuple

import jax
import optax


class GradientStep(NamedTuple):
    params: Any  # after the optimizer step
    opt_state: Any
    aux: Any  # what the loss returned beside its value (its metrics, and what later losses reuse)
    grad_norm: jax.Array  # global L2 norm of the gradient, before the optimizer (clipping included) sees it
    grads: Any = None  # the gradient itself (ACE's dormancy reads it; unused, jit drops it)


def gradient_step(loss_fn: Callable, params, opt_state, optimizer: optax.GradientTransformation, *args
                  ) -> GradientStep:
    """Differentiate ``loss_fn(params, *args) -> (loss, aux)`` w.r.t. ``params`` and take one optimizer step.

    The caller decides when the new params enter its state, so an agent whose losses must all see the old
    parameters (TQC, DSAC-T) takes every step first and writes them afterwards.
    """
    grads, aux = jax.grad(loss_fn, has_aux=True)(params, *args)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return GradientStep(optax.apply_updates(params, updates), opt_state, aux, optax.tree.norm(grads), grads)


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
