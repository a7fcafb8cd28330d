"""Agents, one self-contained file each. ``get_agent`` resolves a registered name or ``module:attribute``."""
from __future__ import annotations

import importlib

from jaxrl import ConfigError
from jaxrl.agent import Agent

REGISTERED = {"sac": "agents.sac", "td3": "agents.td3", "tqc": "agents.tqc", "dsac_t": "agents.dsac_t",
              "simbav2": "agents.simbav2", "tdmpc2": "agents.tdmpc2",
              "fasttd3": "agents.fasttd3", "fastsac": "agents.fastsac"}


def list_agents() -> list[str]:
    return sorted(REGISTERED)


def get_agent(name: str) -> Agent:
    """``sac`` or an import path ``package.module:ATTRIBUTE`` naming an ``Agent`` (for your own agents/losses)."""
    if name in REGISTERED:
        return importlib.import_module(REGISTERED[name]).AGENT
    if ":" in name:
        module_name, _, attr = name.partition(":")
        try:
            agent = getattr(importlib.import_module(module_name), attr)
        except (ImportError, AttributeError) as e:
            raise ConfigError(f"cannot load agent {name!r}: {e}") from None
        if not isinstance(agent, Agent):
            raise ConfigError(f"agent {name!r} is a {type(agent).__name__}, not a jaxrl.agent.Agent")
        return agent
    raise ConfigError(f"unknown agent {name!r}; valid: {', '.join(list_agents())} "
                      "or an import path 'module:ATTRIBUTE'")
