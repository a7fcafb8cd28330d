"""Training progress as every agent function sees it: ``state.progress`` inside ``act``, ``update`` and the losses.

    def critic_loss(critic_params, state, batch, key, cfg):
        tau = state.progress.interpolate(cfg.tau_start, cfg.tau_end, over=0.3)  # anneal over 30 % of the run
        ...

The loop sets ``progress`` on the agent's state before each call of ``act`` and ``update`` and clears it (None)
on the way out, so the saved training state holds no copy of it and checkpoints keep their layout: its counters
are the ``TrainState``'s own (``env_steps``, ``updates``), exact after a resume and shared by every member of a
seed or sweep program. The planned totals come from the loop config (``planned``): a ``--resume --steps`` that
lengthens a run lengthens them from that chunk on. All four are traced int32 scalars: a schedule never
recompiles the program.

An agent's ``State`` gets the field by declaring it (every built-in agent does; a subclass of one inherits it):

    progress: Progress | None = progress_field()

A ``State`` without the field is left alone (a plug-in that keeps its own counter still works).
"""
from __future__ import annotations

import dataclasses
import math

import flax.struct
import jax
import jax.numpy as jnp


@flax.struct.dataclass
class Progress:
    """Where the run is when the agent function is called; int32 scalars."""

    updates: jax.Array
    """gradient updates done before this call (in ``update``: this update's index, from 0)"""
    env_steps: jax.Array
    """env steps collected so far (action repeats included)"""
    planned_updates: jax.Array
    """gradient updates the whole run will do (pretraining included)"""
    planned_env_steps: jax.Array
    """env steps the whole run will collect (rounded up to whole chunks, as the loop trains)"""

    @property
    def fraction(self) -> jax.Array:
        """env_steps / planned_env_steps, in [0, 1]: the fraction of the run's env steps collected. A program run
        past its planned end (``run_chunk`` called again from Python) stays at 1: schedules hold their end values
        rather than extrapolate."""
        done = self.env_steps.astype(jnp.float32) / jnp.maximum(self.planned_env_steps, 1).astype(jnp.float32)
        return jnp.minimum(done, 1.0)

    @property
    def update_fraction(self) -> jax.Array:
        """updates / planned_updates, in [0, 1]: the fraction of the run's gradient updates done (1 past the plan)."""
        done = self.updates.astype(jnp.float32) / jnp.maximum(self.planned_updates, 1).astype(jnp.float32)
        return jnp.minimum(done, 1.0)

    def interpolate(self, start, end, over=1.0, by: str = "env_steps") -> jax.Array:
        """Linear from ``start`` (at the run's start) to ``end`` (once ``over`` of the run is done), constant after;
        ``by`` counts the run in ``env_steps`` or ``updates``."""
        done = self.fraction if by == "env_steps" else self.update_fraction
        weight = jnp.clip(done / jnp.maximum(jnp.asarray(over, jnp.float32), 1e-12), 0.0, 1.0)
        return start + (end - start) * weight


def progress_field():
    """The ``State`` field the loop fills in: keyword-only with default None, so subclasses may add fields without
    defaults and ``init`` need not set it."""
    return flax.struct.field(default=None, kw_only=True)


def has_progress(state) -> bool:
    return dataclasses.is_dataclass(state) and any(f.name == "progress" for f in dataclasses.fields(state))


def attach(state, progress: Progress):
    """``state`` with ``progress`` set, for a State that declares the field; any other state unchanged."""
    return state.replace(progress=progress) if has_progress(state) else state


def detach(state):
    """``state`` without progress (None), as the training state stores it."""
    return state.replace(progress=None) if has_progress(state) else state


def at(updates, env_steps, planned_updates: int, planned_env_steps: int) -> Progress:
    """A Progress of int32 scalars (the harness and tests build one at a given update count with it)."""
    as_int = lambda x: jnp.asarray(x, jnp.int32)  # noqa: E731
    return Progress(as_int(updates), as_int(env_steps), as_int(planned_updates), as_int(planned_env_steps))


def planned_totals(total_blocks: int, block_env_steps: int, block_updates: int, first_update_env_step: int,
                   pretrain_updates: int) -> tuple[int, int]:
    """(updates, env steps) a run of ``total_blocks`` blocks does: block b (from 1) ends at b * block_env_steps
    env steps and updates when that is at least ``first_update_env_step``; the first such block also pretrains."""
    first_learning_block = max(1, math.ceil(first_update_env_step / block_env_steps))
    learning_blocks = max(0, total_blocks - first_learning_block + 1)
    updates = learning_blocks * block_updates + (pretrain_updates if learning_blocks else 0)
    return updates, total_blocks * block_env_steps
