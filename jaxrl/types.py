"""Pytrees exchanged between environments, the replay buffer, the loop and the agents."""
from __future__ import annotations

import flax.struct
import jax
import jax.numpy as jnp


@flax.struct.dataclass
class EnvSpec:
    """Static facts about an environment an agent needs to build its networks.

    Actions are always in [-1, 1]^action_size (every supported env uses that box). Observations are one
    [obs_size] vector, or, where ``obs_parts`` names parts (Playground's ``state`` and ``privileged_state``), a
    dict of one vector per part; ``obs_size`` is then the sum of the parts' sizes.
    """

    obs_size: int = flax.struct.field(pytree_node=False)
    action_size: int = flax.struct.field(pytree_node=False)
    decisions_per_episode: int = flax.struct.field(pytree_node=False)  # the time limit in agent decisions
    can_terminate: bool = flax.struct.field(pytree_node=False, default=True)
    obs_parts: tuple[tuple[str, int], ...] = flax.struct.field(pytree_node=False, default=())  # (name, size)
    # With structured observations, the part the actor reads (and with it acting, evaluation and exported
    # policies) and the part the critics and their targets read; None for flat observations. The loop sets them
    # from LoopConfig.actor_obs / critic_obs before the agent builds its networks.
    actor_obs: str | None = flax.struct.field(pytree_node=False, default=None)
    critic_obs: str | None = flax.struct.field(pytree_node=False, default=None)


def obs_structure(spec: EnvSpec):
    """The observation's sizes as the pytree observations have: ``obs_size``, or {part: size}."""
    return dict(spec.obs_parts) if spec.obs_parts else spec.obs_size


def zeros_obs(spec: EnvSpec, leading_shape: tuple[int, ...]):
    """A float32 observation of zeros with these leading axes, flat or structured as ``spec`` says."""
    return jax.tree.map(lambda size: jnp.zeros((*leading_shape, size), jnp.float32), obs_structure(spec))


@flax.struct.dataclass
class Batch:
    """A batch of transitions (s, a, r, s', terminated, truncated) and the discount of their bootstrap.

    ``terminated`` is true only for a real end of the task (no bootstrap); ``truncated`` is a time limit,
    through which targets must still bootstrap from ``next_obs`` (the true final observation).

    With n-step sampling a transition spans m <= n steps (fewer where its episode ends or the written data stops):
    ``reward`` is sum_{k<m} gamma^k r_{t+k}, ``next_obs`` the observation after the m-th step, ``terminated`` /
    ``truncated`` those of the m-th step, and ``discount`` gamma^m. One-step transitions have m = 1: ``discount``
    is gamma. Targets are ``reward + discount * (1 - terminated) * V(next_obs)`` (``jaxrl.losses.td_target``).
    """

    obs: jax.Array
    action: jax.Array
    reward: jax.Array
    next_obs: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    discount: jax.Array


@flax.struct.dataclass
class WindowBatch:
    """Contiguous sub-trajectories of length L: obs has L+1 entries, the others L. Leading axes [B, L].

    ``valid`` [B] is False for the rare element for which no window inside one episode was found (weight its
    loss by it)."""

    obs: jax.Array
    action: jax.Array
    reward: jax.Array
    terminated: jax.Array
    truncated: jax.Array
    valid: jax.Array
