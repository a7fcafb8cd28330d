"""The agent contract: an agent is a record of pure functions over a pytree state.

    Config                                   frozen dataclass of hyperparameters (defaults = official code)
    init(key, spec, cfg) -> state            pytree: params, target params, optimizer states, ...
    act(state, obs, key, cfg, deterministic) -> actions in [-1, 1], batched over envs
    update(state, batch, key, cfg) -> (state, metrics)     metrics: dict of scalars
    loop_defaults                            LoopConfig fields this agent's official code sets differently
                                             (e.g. DSAC-T's 1 update per 20 env steps); flags still override


Numeric hyperparameters (learning rates, tau, gamma, ...) are pytree leaves of ``Config`` so that a sweep can
pass them as traced arrays; fields that fix shapes or code paths are static (``flax.struct.field``).
"""
from __future__ import annotations

from types import MappingProxyType
from typing import Any, Callable, Mapping, NamedTuple


class Agent(NamedTuple):
    name: str
    Config: type
    init: Callable[..., Any]
    act: Callable[..., Any]
    update: Callable[..., Any]
    loop_defaults: Mapping[str, Any] = MappingProxyType({})
