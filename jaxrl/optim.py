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


def gradient_step(loss_fn: Callable, params, opt_state, optimizer: optax.GradientTransformation, *args
                  ) -> GradientStep:
    """Differentiate ``loss_fn(params, *args) -> (loss, aux)`` w.r.t. ``params`` and take one optimizer step.

    The caller decides when the new params enter its state, so an agent whose losses must all see the old
    parameters (TQC, DSAC-T) takes every step first and writes them afterwards.
    """
    grads, aux = jax.grad(loss_fn, has_aux=True)(params, *args)
    updates, opt_state = optimizer.update(grads, opt_state, params)
    return GradientStep(optax.apply_updates(params, updates), opt_state, aux, optax.tree.norm(grads))


def grad_norm_metrics(**steps: GradientStep) -> dict[str, jax.Array]:
    """``{"grad_norm/<network>": norm}`` for an update's metrics: ``grad_norm_metrics(critic=..., actor=...)``."""
    return {f"grad_norm/{network}": step.grad_norm for network, step in steps.items()}


def official_delayed_turn(num_updates, policy_delay: int):
    """Whether update number ``num_updates`` (1-based, counted over the run) steps a delayed network: FastTD3's and
    FastSAC's ``i % policy_frequency == 1`` over each batched step's updates i = 0, 1, ... when that count is a
    multiple of ``policy_delay`` (both official codes), e.g. updates 2, 6, 10, ... for a delay of 4."""
    return (num_updates - 1) % policy_delay == 1 % policy_delay
