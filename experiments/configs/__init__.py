"""Named run configs (paper protocols) as TOML files: ``jaxrl train --config simbav2_dmc [flags]``.

A file has the layout of a run directory's ``config.json``: ``agent = "name"`` and the tables ``[run]``,
``[loop]`` and ``[agent_config]``, each holding fields of ``RunConfig``, ``LoopConfig`` and the agent's
``Config``; an optional ``[reproduce]`` table (algorithm name in the targets table, tasks, seeds, max_return)
is what ``jaxrl reproduce`` runs. Tables ``[tasks."<env>".run]``, ``[tasks."<env>".loop]`` and
``[tasks."<env>".agent_config]`` hold one task's own values (FastTD3's per-task noise and supports, its
pushes; not the env, which is the task): they apply on top of the file's when the run's env is that task.
Precedence: the agent's defaults < the file < its task's tables < command-line flags. TOML because comments can say
where each protocol value comes from (``tomllib`` is in the standard library).
"""
from __future__ import annotations

import dataclasses
import os
import tomllib
import types
import typing
from typing import Any

from jaxrl import ConfigError

CONFIG_DIR = os.path.dirname(os.path.abspath(__file__))
SECTIONS = ("run", "loop", "agent_config")
TASK_SECTIONS = ("run", "loop", "agent_config")  # what a task's own tables may set (not its env: the task itself)


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


# [reproduce]: the targets table's algorithm, the tasks, seeds, the max return (aggregates), and ``unverified``: the
# protocol's settings that no source confirms as the published baseline's (the report says so).
REPRODUCE_KEYS = ("algorithm", "tasks", "seeds", "max_return", "unverified")


def load(name: str) -> dict[str, Any]:
    """The parsed file: {"agent": str | None, "run": {...}, "loop": {...}, "agent_config": {...}}."""
    path = resolve(name)
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"config {path} is not valid TOML: {e}") from None
    unknown = set(data) - {"agent", "description", "reproduce", "tasks", *SECTIONS}
    if unknown:
        raise ConfigError(f"config {path}: unknown key(s) {', '.join(sorted(unknown))}; valid: agent, description, "
                          f"reproduce, tasks, {', '.join(SECTIONS)}")
    unknown = set(data.get("reproduce", {})) - set(REPRODUCE_KEYS)
    if unknown:
        raise ConfigError(f"config {path} [reproduce]: unknown key(s) {', '.join(sorted(unknown))}; valid: "
                          f"{', '.join(REPRODUCE_KEYS)}")
    tasks = {}
    for env, tables in data.get("tasks", {}).items():
        unknown = set(tables) - set(TASK_SECTIONS)
        if unknown:
            raise ConfigError(f"config {path} [tasks.\"{env}\"]: unknown table(s) {', '.join(sorted(unknown))}; "
                              f"valid: {', '.join(TASK_SECTIONS)}")
        if "env" in tables.get("run", {}):
            raise ConfigError(f"config {path} [tasks.\"{env}\".run]: env cannot be set there (it is the task)")
        tasks[env] = {section: dict(tables.get(section, {})) for section in TASK_SECTIONS}
    return {"agent": data.get("agent"), "description": data.get("description", ""),
            "reproduce": dict(data.get("reproduce", {})), "tasks": tasks,
            **{s: dict(data.get(s, {})) for s in SECTIONS}}


def for_task(loaded: dict[str, Any], env: str) -> dict[str, Any]:
    """``loaded`` (what ``load`` returns) with the tables of task ``env`` applied on top of the file's own."""
    task = loaded.get("tasks", {}).get(env, {})
    return {**loaded, **{section: {**loaded[section], **task.get(section, {})} for section in TASK_SECTIONS}}


def check_fields(cls, values: dict[str, Any], where: str) -> None:
    """Reject keys that are not fields of ``cls`` (a typo must not silently fall back to a default) and values
    of the wrong type for their field (``check_types``)."""
    fields = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(values) - fields)
    if unknown:
        raise ConfigError(f"{where}: unknown field(s) {', '.join(unknown)} of {cls.__name__}; valid: "
                          f"{', '.join(sorted(fields))}")
    check_types(cls, values, where)


def check_types(cls, values: dict[str, Any], where: str) -> None:
    """Each value must fit its field's annotation as TOML or JSON (a run's config.json) writes it: an int for
    ``int`` (not a bool), an int or a float for ``float``, a list of ints for ``tuple[int, ...]``, and None
    (JSON null) only for ``X | None``. Fields with other annotations are not checked."""
    try:
        hints = typing.get_type_hints(cls)
    except Exception:  # noqa: BLE001 - a user's config class with annotations that do not resolve: skip the check
        return
    for name, value in values.items():
        if name in hints and not _fits(value, hints[name]):
            raise ConfigError(f"{where}: field {name} = {value!r} must be {_describe(hints[name])}")


def _fits(value: Any, hint: Any) -> bool:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return any(_fits(value, option) for option in typing.get_args(hint))
    if hint is type(None):
        return value is None
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint in (bool, str):
        return isinstance(value, hint)
    if typing.get_origin(hint) is tuple:
        args = typing.get_args(hint)
        if not isinstance(value, (list, tuple)):
            return False
        if len(args) == 2 and args[1] is Ellipsis:
            return all(_fits(v, args[0]) for v in value)
        return len(value) == len(args) and all(_fits(v, a) for v, a in zip(value, args, strict=True))
    return True  # an annotation this check does not know: leave the value to the config class


def _describe(hint: Any) -> str:
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        options = [a for a in typing.get_args(hint) if a is not type(None)]
        text = " or ".join(_describe(a) for a in options)
        return f"{text} or null" if len(options) < len(typing.get_args(hint)) else text
    if typing.get_origin(hint) is tuple:
        args = typing.get_args(hint)
        if len(args) == 2 and args[1] is Ellipsis:
            return f"a list of {_describe(args[0]).removeprefix('a ').removeprefix('an ')}s"
        return f"a list of {len(args)} values"
    names = {int: "an int", float: "a float", bool: "a bool (true or false)", str: "a string"}
    return names.get(hint, getattr(hint, "__name__", str(hint)))
