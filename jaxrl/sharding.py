"""Spreading a run over devices with ``jax.sharding``: its members (seeds x swept hyperparameters), and one run's
training envs and replay buffer (data parallelism).

Every per-member leaf of the ``TrainState`` has the member axis first; ``NamedSharding(mesh, P("members"))``
splits that axis over the mesh's ``members`` axis and the step counters (scalars shared by all members) are
replicated. A mesh with an ``envs`` axis (``run_mesh(devices, env_shards)``) also splits every leaf that indexes
the training envs (``jaxrl.loop.env_axes``: the buffer's rows, the envs' states, the acting carry) along it: each
device steps its own envs and stores their transitions, and with ``loop.env_shards`` equal to that axis's size
each update's batch is drawn stratified, batch_size / env_shards transitions from each shard
(``jaxrl.loop.draw``), so every device gathers from its own part of the buffer; the agent's parameters are
replicated and XLA all-reduces their gradients over the batch's devices. ``run_chunk`` is unchanged: jit
partitions the program along the sharded axes (GSPMD). The same code runs on 1 CPU, N GPUs, a TPU slice, or
several hosts after ``jax.distributed.initialize()`` (``jax.devices()`` is then global, and each process computes
only its own shards).
"""
from __future__ import annotations

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from jaxrl import ConfigError

AXIS = "members"
ENVS = "envs"


def member_mesh(devices=None) -> Mesh:
    """A 1-D mesh named ``members`` over ``devices`` (default: every device of every process)."""
    return Mesh(np.asarray(jax.devices() if devices is None else devices), (AXIS,))


def run_mesh(devices=None, env_shards: int = 1) -> Mesh:
    """``member_mesh`` when ``env_shards`` is 1; else a 2-D mesh ``(members, envs)`` of shape
    (devices / env_shards, env_shards): each run's envs split over ``env_shards`` devices, its members over the
    rest (one line when the devices do not split so)."""
    devices = np.asarray(jax.devices() if devices is None else devices)
    if env_shards == 1:
        return member_mesh(devices)
    if devices.size % env_shards:
        raise ConfigError(f"env_shards={env_shards} does not divide the {devices.size} device(s) given: use a "
                          f"divisor of {devices.size} (--env-shards)")
    return Mesh(devices.reshape(devices.size // env_shards, env_shards), (AXIS, ENVS))


def check_divisible(num_members: int, mesh: Mesh) -> None:
    size = mesh.devices.shape[0]  # the members axis comes first (run_mesh)
    if num_members % size:
        raise ConfigError(f"{num_members} member(s) cannot be split evenly over {size} devices; use a multiple of "
                          f"{size} seeds x configs, or --no-shard-members to keep every member on one device")


def state_shardings(abstract_state, mesh: Mesh, env_axes=None):
    """Per-member leaves (leading member axis) split over the mesh's ``members`` axis; scalars (shared counters)
    replicated. ``env_axes`` (a tree like the state's: each leaf's env axis, -1 for none; ``jaxrl.loop.env_axes``)
    splits those axes over the mesh's ``envs`` axis where it has one."""
    split_envs = ENVS in mesh.axis_names
    axes = jax.tree.map(lambda _: -1, abstract_state) if env_axes is None else env_axes

    def sharding(leaf, env_axis):
        if not leaf.ndim:
            return NamedSharding(mesh, PartitionSpec())
        spec = [AXIS] + [None] * (leaf.ndim - 1)
        if split_envs and env_axis > 0:
            spec[env_axis] = ENVS
        return NamedSharding(mesh, PartitionSpec(*spec))

    return jax.tree.map(sharding, abstract_state, axes)


def to_host(tree):
    """Fetch (possibly sharded, possibly multi-host) arrays as numpy; every process gets the whole tree."""
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        return multihost_utils.process_allgather(tree, tiled=True)
    return jax.device_get(tree)
