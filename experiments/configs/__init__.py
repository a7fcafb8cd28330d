"""Named run configs (paper protocols) as TOML files: ``jaxrl train --config simbav2_dmc [flags]``.

A file has the layout of a run directory's ``config.json``: ``agent = "name"`` and the tables ``[run]``,
``[loop]`` and ``[agent_config]``, each holding fields of ``RunConfig``, ``LoopConfig`` and the agent's
``Config``; an optional ``[reproduce]`` table (algorithm name in the targets table, tasks, seeds, max_return)
is what ``jaxrl reproduce`` runs. Precedence: the agent's defaults < the file < command-line flags. TOML because comments can say
where each protocol value comes from (``tomllib`` is in the standard library).
"""
from __future__ import annotations

import dataclasses
import os
import tomllib
from typing import Any

from jaxrl import ConfigError

CONFIG_DIR = os.path.dirname(os.path.abspath(__file__))
SECTIONS = ("run", "loop", "agent_config")


def list_configs() -> list[str]:
    return sorted(name[:-5] for name in os.listdir(CONFIG_DIR) if name.endswith(".toml"))


def resolve(name: str) -> str:
    """A path to a .toml file, or the name of one in experiments/configs/."""
    if os.path.isfile(name):
        return name
    path = os.path.join(CONFIG_DIR, f"{name}.toml")
    if os.path.isfile(path):
        return path
    raise ConfigError(f"unknown config {name!r}; valid: {', '.join(list_configs())} or a path to a .toml file")


def load(name: str) -> dict[str, Any]:
    """The parsed file: {"agent": str | None, "run": {...}, "loop": {...}, "agent_config": {...}}."""
    path = resolve(name)
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"config {path} is not valid TOML: {e}") from None
    unknown = set(data) - {"agent", "description", "reproduce", *SECTIONS}
    if unknown:
        raise ConfigError(f"config {path}: unknown key(s) {', '.join(sorted(unknown))}; valid: agent, description, "
                          f"reproduce, {', '.join(SECTIONS)}")
    return {"agent": data.get("agent"), "description": data.get("description", ""),
            "reproduce": dict(data.get("reproduce", {})), **{s: dict(data.get(s, {})) for s in SECTIONS}}


def check_fields(cls, values: dict[str, Any], where: str) -> None:
    """Reject keys that are not fields of ``cls`` (a typo must not silently fall back to a default)."""
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - fields)
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {', '.join(unknown)} of {cls.__name__}; valid: "
                          f"{', '.join(sorted(fields))}")
