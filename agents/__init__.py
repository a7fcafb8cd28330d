"""Agents, one self-contained file each. ``get_agent`` resolves a registered name or ``module:attribute``;
``agent_spec`` is its inverse, what a run records so that ``--resume``, ``export``, ``video`` and sweeps load the
same agent again (a plug-in included)."""
from __future__ import annotations

import importlib
import os
import sys

from jaxrl import ConfigError
from jaxrl.agent import Agent

REGISTERED = {"sac": "agents.sac", "td3": "agents.td3", "tqc": "agents.tqc", "dsac_t": "agents.dsac_t",
              "simbav2": "agents.simbav2", "tdmpc2": "agents.tdmpc2",
              "fasttd3": "agents.fasttd3", "fastsac": "agents.fastsac"}


def list_agents() -> list[str]:
    return sorted(REGISTERED)


def _import_module(module_name: str, spec: str):
    """The module of a plug-in agent, looked up as ``python -m`` would: the working directory first, then
    ``sys.path`` (PYTHONPATH included)."""
    cwd = os.getcwd()
    if cwd not in sys.path:
        sys.path.insert(0, cwd)  # the console script's sys.path starts at its own bin/, not where the user is
    try:
        return importlib.import_module(module_name)
    except ModuleNotFoundError as e:
        if e.name is None or not module_name.startswith(e.name):
            raise  # a module the plug-in itself imports is missing: its own error says which
        path = os.environ.get("PYTHONPATH")
        raise ConfigError(f"cannot import module {module_name!r} of agent {spec!r}: looked up in the working "
                          f"directory {cwd} and PYTHONPATH={path if path else '(unset)'}; run from the directory "
                          "that holds it, or add that directory to PYTHONPATH") from None


# What get_agent loaded from each import path: agent_spec answers with the path the user gave first.
_LOADED: dict[int, tuple[Agent, str]] = {}


def get_agent(name: str) -> Agent:
    """``sac`` or an import path ``package.module:ATTRIBUTE`` naming an ``Agent`` (for your own agents/losses)."""
    if name in REGISTERED:
        return importlib.import_module(REGISTERED[name]).AGENT
    if ":" in name:
        module_name, _, attr = name.partition(":")
        try:
            agent = getattr(_import_module(module_name, name), attr)
        except (ImportError, AttributeError) as e:
            raise ConfigError(f"cannot load agent {name!r}: {e}") from None
        if not isinstance(agent, Agent):
            raise ConfigError(f"agent {name!r} is a {type(agent).__name__}, not a jaxrl.agent.Agent")
        _LOADED.setdefault(id(agent), (agent, name))
        return agent
    raise ConfigError(f"unknown agent {name!r}; valid: {', '.join(list_agents())} "
                      "or an import path 'module:ATTRIBUTE'")


def agent_spec(agent: Agent) -> str | None:
    """What ``get_agent`` loads ``agent`` back from: its registered name, or ``module:ATTRIBUTE`` of an imported
    module that holds it (the module its functions or name point to first); None for an agent no importable module
    holds (one built in ``__main__`` or a notebook)."""
    if agent.name in REGISTERED and get_agent(agent.name) is agent:
        return agent.name
    if id(agent) in _LOADED and _LOADED[id(agent)][0] is agent:
        return _LOADED[id(agent)][1]
    found = []
    for module_name, module in list(sys.modules.items()):
        if module is None or module_name == "__main__" or module_name.split(".")[-1].startswith("_"):
            continue
        try:
            names = [attr for attr, value in vars(module).items() if value is agent]
        except TypeError:
            continue
        found += [(module_name, attr) for attr in names]
    if not found:
        return None
    # Prefer where the agent is defined (the module of its update or init) over a module that re-exports it, and
    # anything over a test module that imported it.
    own = {getattr(getattr(agent, f), "__module__", None) for f in ("update", "init", "act")}
    is_test = lambda module: any(part.startswith("test") for part in module.split("."))  # noqa: E731
    module_name, attr = min(found, key=lambda m: (m[0] not in own, is_test(m[0]), m[1] != "AGENT", m))
    return f"{module_name}:{attr}"
