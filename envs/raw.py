"""The single-env interface every backend (Brax, Playground, the toy tasks) is adapted to."""
from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Any


@dataclasses.dataclass(frozen=True)
class RawEnv:
    """One unbatched environment.

    ``reset(key) -> (state, obs)``; ``step(state, action) -> (state, obs, reward, terminated)``.
    ``episode_length`` is the time limit in env steps, i.e. simulator steps (the wrappers turn it into truncation).
    ``obs`` is one [obs_size] vector or, where ``obs_parts`` names (part, size) pairs, a dict of one vector per part
    (``obs_size`` is then their total). ``render(states, width, height) -> [H, W, 3] uint8 frames`` draws a list of
    states (MuJoCo's renderer, for Brax and Playground envs; None where the env cannot draw itself), and
    ``control_dt`` is the simulated seconds one step covers (a video's frame rate; None where unknown).
    """

    name: str
    obs_size: int
    action_size: int
    episode_length: int
    can_terminate: bool
    reset: Callable[[Any], tuple[Any, Any]]
    step: Callable[[Any, Any], tuple[Any, Any, Any, Any]]
    obs_parts: tuple[tuple[str, int], ...] = ()
    render: Callable[[list, int, int], list] | None = None
    control_dt: float | None = None
