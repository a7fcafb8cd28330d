"""Agents, one self-contained file each. ``get_agent`` resolves a registered name or ``module:attribute``;
``agent_spec`` is its inverse, what a run records so that ``--resume``, ``export``, ``video`` and sweeps load the
same agent again (a plug-in included)."""
from __future__ import annotations

import importlib
import os
import re
import sys

from jaxrl import ConfigError
from jaxrl.agent import Agent

REGISTERED = {"sac": "agents.sac", "td3": "agents.td3", "tqc": "agents.tqc", "dsac_t": "agents.dsac_t",
              "simbav2": "agents.simbav2", "tdmpc2": "agents.tdmpc2",
              "fasttd3": "agents.fasttd3", "fastsac": "agents.fastsac", "crossq": "agents.crossq"}


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


_DOTTED = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")


def _import_path_of_file(name: str) -> str:
    """The form to give instead of a file path ``dir/file.py:ATTR`` (imports need a module path, not a file)."""
    path, _, attr = name.rpartition(":")
    stem = os.path.splitext(path)[0]
    if os.path.isabs(stem) or stem.startswith(".."):
        return (f"{os.path.basename(stem)}:{attr or 'AGENT'} with PYTHONPATH={os.path.dirname(os.path.abspath(path))}"
                " (or run from that directory)")
    return f"{stem.strip('./').replace(os.sep, '.')}:{attr or 'AGENT'} (from the directory that holds {path})"


def get_agent(name: str) -> Agent:
    """``sac`` or an import path ``package.module:ATTRIBUTE`` naming an ``Agent`` (for your own agents/losses).
    Every malformed name, a module that cannot be imported (its own error and line included) and an attribute that
    is not an ``Agent`` are one ``ConfigError`` line."""
    if not isinstance(name, str) or not name.strip():
        raise ConfigError(f"agent name {name!r} is empty; valid: {', '.join(list_agents())} or an import path "
                          "'module:ATTRIBUTE'")
    if name in REGISTERED:
        return importlib.import_module(REGISTERED[name]).AGENT
    if ":" not in name:
        raise ConfigError(f"unknown agent {name!r}; valid: {', '.join(list_agents())} "
                          "or an import path 'module:ATTRIBUTE'")
    module_name, _, attr = name.partition(":")
    if module_name.endswith(".py") or "/" in module_name or os.sep in module_name:
        raise ConfigError(f"agent {name!r} names a file; give its import path instead: "
                          f"{_import_path_of_file(name)}")
    if not _DOTTED.match(module_name) or not attr.isidentifier():
        raise ConfigError(f"agent {name!r} is not of the form 'module.path:ATTRIBUTE' (a dotted module name, one ':', "
                          "a Python name), e.g. experiments.examples.redq:AGENT")
    try:
        agent = getattr(_import_module(module_name, name), attr)
    except ConfigError:
        raise
    except AttributeError as e:
        raise ConfigError(f"cannot load agent {name!r}: {e}") from None
    except Exception as e:  # noqa: BLE001 -- any error of the plug-in's own code at import: one line, with where
        raise ConfigError(f"cannot load agent {name!r}: importing {module_name} raised {_where(e)}") from None
    if not isinstance(agent, Agent):
        raise ConfigError(f"agent {name!r} is a {type(agent).__name__}, not a jaxrl.agent.Agent")
    if not isinstance(agent.name, str) or not agent.name.strip():
        raise ConfigError(f"agent {name!r} has an empty name ({agent.name!r}): give Agent(name=...) a name (run "
                          "directories, summaries and plots show it)")
    _LOADED.setdefault(id(agent), (agent, name))
    return agent


def _where(error: BaseException) -> str:
    """``SyntaxError: invalid syntax (file.py, line 3)``: the exception and the innermost frame it came from."""
    import traceback

    if isinstance(error, SyntaxError):
        return f"SyntaxError: {error.msg} ({os.path.basename(error.filename or '?')}, line {error.lineno})"
    frames = traceback.extract_tb(error.__traceback__)
    where = f" ({os.path.basename(frames[-1].filename)}, line {frames[-1].lineno})" if frames else ""
    message = str(error).splitlines()[0] if str(error) else ""
    return f"{type(error).__name__}: {message}{where}".replace(": (", " (")


def display_name(agent: Agent) -> str:
    """The agent as a run's summary and default directory name show it: its own name, except for an agent that
    takes a built-in's name without being it (a plug-in called "sac"): then its import path, so that nothing it
    produced reads as the built-in's."""
    if agent.name in REGISTERED and get_agent(agent.name) is not agent:
        return agent_spec(agent) or f"{agent.name} (a plug-in, not the built-in)"
    return agent.name


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
