"""Spreading a run's members (seeds x swept hyperparameters) over devices with ``jax.sharding``.

Every per-member leaf of the ``TrainState`` has the member axis first; ``NamedSharding(mesh, P("members"))``
splits that axis over a 1-D device mesh and the step counters (scalars shared by all members) are replicated.
``run_chunk`` is unchanged: jit partitions the vmapped program along the sharded axis (GSPMD), members never
talk to each other, so the only cross-device traffic is the replicated counters' agreement. The same code runs
on 1 CPU, N GPUs, a TPU slice, or several hosts after ``jax.distributed.initialize()`` (``jax.devices()`` is then
global, and each process computes only its own members' shards).
"""
from __future__ import annotations

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from jaxrl import ConfigError

AXIS = "members"


def member_mesh(devices=None) -> Mesh:
    """A 1-D mesh named ``members`` over ``devices`` (default: every device of every process)."""
    return Mesh(np.asarray(jax.devices() if devices is None else devices), (AXIS,))


def check_divisible(num_members: int, mesh: Mesh) -> None:
    size = mesh.devices.size
    if num_members % size:
        raise ConfigError(f"{num_members} member(s) cannot be split evenly over {size} devices; use a multiple of "
                          f"{size} seeds x configs, or --no-shard-members to keep every member on one device")


def state_shardings(abstract_state, mesh: Mesh):
    """Per-member leaves (leading member axis) split over the mesh; scalars (shared counters) replicated."""
    split, replicated = NamedSharding(mesh, PartitionSpec(AXIS)), NamedSharding(mesh, PartitionSpec())
    return jax.tree.map(lambda leaf: split if leaf.ndim else replicated, abstract_state)


def to_host(tree):
    """Fetch (possibly sharded, possibly multi-host) arrays as numpy; every process gets the whole tree."""
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        return multihost_utils.process_allgather(tree, tiled=True)
    return jax.device_get(tree)
