"""The agent contract: an agent is a record of pure functions over a pytree state.

    Config                                   frozen dataclass of hyperparameters (defaults = official code)
    init(key, spec, cfg) -> state            pytree: params, target params, optimizer states, ...
    act(state, obs, key, cfg, deterministic, carry) -> (actions, carry)
                                             actions in [-1, 1], batched over envs; ``carry`` is per-env acting
                                             state kept between steps (TD-MPC2's planner warm start), () for
                                             memoryless agents, which return it unchanged
    update(state, batch, key, cfg) -> (state, metrics)     metrics: dict of scalars

and, with defaults that fit model-free agents:

    init_carry(num_envs, spec, cfg) -> carry  the acting state of fresh episodes; the loop resets each env's
                                             carry to it when that env starts an episode (default: ())
    sample_batch(buffer, key, cfg) -> batch  what ``update`` trains on (default: cfg.batch_size uniform
                                             transitions; TD-MPC2: sub-trajectories inside one episode)
    sample_with_state(state, buffer, key, cfg) -> batch
                                             replay sampling that reads the agent's state (Symphony's fading
                                             replay reads where its exploration ended; prioritised replay would
                                             keep its priorities there); when set, the loop calls it instead of
                                             ``sample_batch`` (default: None)
    loop_defaults                            LoopConfig fields this agent's official code sets differently
                                             (e.g. DSAC-T's 1 update per 20 env steps); flags still override
    terminal_obs                             whether ``update`` reads the true s' of terminated transitions (TD-MPC2's
                                             model losses do; TD targets multiply it by zero): without it the buffer
                                             keeps final observations for time limits only, half the observation
                                             memory on tasks that can terminate (default: False)
    refresh(state, buffer, key, cfg) -> state
                                             a step that reads the replay buffer as stored (raw observations and
                                             rewards, ``jaxrl.buffer.recent`` for the newest transitions in order)
                                             and may change any leaf of the agent's state, run inside the compiled
                                             program for every member once env steps cross each multiple of
                                             ``refresh_interval(cfg)`` (ACE's causal weights; checkpointed and
                                             resumed like any update; default: none)
    refresh_interval(cfg) -> int             env steps between refreshes, read once from the program's config
                                             (so from static fields: 0 means never; default: 0)
    check_config(cfg) -> None                raises ConfigError (one line) for impossible values; the loop calls
                                             it on the host with every member's concrete config before compiling,
                                             because inside the program numeric fields are traced (helpers:
                                             ``jaxrl.checks``; default: no checks)

Numeric hyperparameters (learning rates, tau, gamma, ...) are pytree leaves of ``Config``: the training state
holds each member's values as arrays (``TrainState.hparams``), so a sweep vmaps over them like over seeds, and
``init`` / ``act`` / ``update`` must treat them as traced values (no Python ``if`` on them). Fields that fix
shapes or code paths are static (``flax.struct.field(pytree_node=False)``); changing one compiles a new program.

What the engine reads from an agent's ``Config``: ``batch_size`` (checked against the buffer's size, and drawn by
the default ``sample_batch``), ``n_step`` and ``gamma`` in the default ``sample_batch`` (n-step returns: the
batch's ``reward`` is the discounted sum and its ``discount`` gamma^m; see ``jaxrl.types.Batch``) and, with
``LoopConfig.scale_rewards``, ``gamma`` (the discount of the running returns that scale rewards). Nothing else:
every other field is the agent's own.

What ``update`` returns as metrics: a dict of scalars per update; the loop averages them over each chunk's updates
and logs them as ``train/<name>``. Every agent logs its losses and ``grad_norm/<network>`` (``jaxrl.optim``).

What each agent's ``make_update`` expects from the losses it is given (beyond ``(loss, aux)``; every other aux
entry becomes a metric):

    sac, tqc, simbav2   actor_loss_fn's aux has "log_prob" [B] (the temperature loss reuses it; not logged)
    td3, fasttd3        actor_loss_fn's aux has "actor_loss" (reported on the updates that skip the actor)
    fastsac             critic_loss_fn's aux has "next_log_prob" [B] (the temperature loss reuses it; not logged);
                        actor_loss_fn's aux has "actor_loss" and "entropy"
    dsac_t              critic_loss_fn's aux has "mean_std" [2] (the new running b of each critic);
                        actor_loss_fn's aux has "actor_loss", "entropy" and "log_prob" [B]
    tdmpc2              world_model_loss_fn's aux is (metrics, latents [H+1, B, latent_dim]), the latents that
                        the policy loss trains on; policy_loss_fn's aux has "q_scale" (the running Q scale)
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any, NamedTuple

import flax.struct

from jaxrl import buffer as buffer_lib

_SAME = object()


def added_field(default, static: bool = True, before=_SAME):
    """A Config field added after runs and sweeps were saved with its Config. ``before``: the value that gives the
    behaviour before it existed (default: ``default`` itself). A saved run whose config.json lacks the field
    resumes with ``before`` (``experiments.rundir.resolve``), and sweep member ids leave the field out at
    ``before``, so the finished members of earlier sweeps keep their ids and are reused exactly when the field
    changes nothing. ``static``: it fixes shapes or code paths (most such fields do)."""
    return flax.struct.field(pytree_node=not static, default=default,
                             metadata={"added_later": True, "before": default if before is _SAME else before})


def fields_added_later(config_class) -> dict:
    """{name: the value before it existed} of ``config_class``'s ``added_field``s."""
    import dataclasses

    return {f.name: f.metadata["before"] for f in dataclasses.fields(config_class) if f.metadata.get("added_later")}


def added_at_default(config_class, config: dict) -> set[str]:
    """The ``added_field``s of ``config_class`` that ``config`` (a dict, as config.json writes it) holds at the
    value that behaves as before they existed."""
    def plain(x):
        return list(x) if isinstance(x, tuple) else x

    return {name for name, before in fields_added_later(config_class).items()
            if name in config and plain(config[name]) == plain(before)}


def extra_field():
    """The ``extra`` field of every built-in ``State``: a plug-in's own learned state (any pytree: a dict of arrays, a
    dataclass), None by default. Neither the engine nor a built-in agent ever reads or writes it, and fields added
    to built-in states later go elsewhere, so a plug-in that keeps its state here never collides with them:
    ``state.replace(extra={"reward_mean": jnp.zeros(())})`` in its ``init``, ``state.extra["reward_mean"]`` after.
    Keyword-only with default None: checkpoints of states without it keep their layout."""
    return flax.struct.field(default=None, kw_only=True)


def check_state_fields(agent_name: str, state) -> None:
    """One ``ConfigError`` line when a plug-in's ``State`` subclass declares a field its base also declares (a base
    that gained a field of that name later, e.g. SAC's ``num_updates``): the two meanings would share one slot."""
    import dataclasses

    from jaxrl import ConfigError

    if not dataclasses.is_dataclass(state):
        return
    declared: dict[str, type] = {}
    for cls in type(state).__mro__:  # the subclass first, then its bases
        for name in cls.__dict__.get("__annotations__", {}):
            if name in declared and cls is not declared[name] and name not in ("progress", "extra"):
                raise ConfigError(
                    f"{agent_name}'s State {declared[name].__qualname__} declares field {name!r}, which its base "
                    f"{cls.__module__}.{cls.__qualname__} also has: rename the plug-in's field, or keep the plug-in's "
                    "own state in state.extra (jaxrl.agent.extra_field), which no built-in field can collide with")
            declared.setdefault(name, cls)


def checked_init(agent: Agent, key, spec, cfg):
    """``agent.init(key, spec, cfg)``, with a clash of a plug-in's field and a built-in state's field one
    ``ConfigError`` line instead of a ``TypeError`` traceback (``check_state_fields``)."""
    import re

    from jaxrl import ConfigError

    try:
        state = agent.init(key, spec, cfg)
    except TypeError as e:
        clash = re.search(r"got multiple values for (?:keyword )?argument '(\w+)'", str(e))
        if clash is None:
            raise
        raise ConfigError(f"{agent.name}'s init builds its State with field {clash.group(1)!r} given twice: the base "
                          "State it copies has a field of that name too (added to it later?); rename the plug-in's "
                          "field, or keep the plug-in's own state in state.extra (jaxrl.agent.extra_field)") from None
    check_state_fields(agent.name, state)
    return state


def delay_fields(metric_names) -> dict:
    """The state fields ``jaxrl.optim.delayed_step`` reads: ``num_updates`` (int32, 0) and ``last_actor_metrics``
    ({name: 0.0} for each metric the delayed step reports)."""
    import jax.numpy as jnp

    return {"num_updates": jnp.zeros((), jnp.int32),
            "last_actor_metrics": dict.fromkeys(metric_names, jnp.zeros((), jnp.float32))}


def no_carry(num_envs: int, spec, cfg) -> tuple:
    """Memoryless agents carry nothing between steps."""
    return ()


def sample_transitions(buffer, key, cfg):
    """``cfg.batch_size`` transitions drawn uniformly from the replay buffer, each over ``cfg.n_step`` steps
    discounted by ``cfg.gamma`` (one step, and no discount in the sum, for a Config without those fields)."""
    return buffer_lib.sample(buffer, key, cfg.batch_size, getattr(cfg, "n_step", 1), getattr(cfg, "gamma", 1.0))


def no_refresh(state, buffer, key, cfg):
    """Agents that learn from batches alone leave their state as it is."""
    return state


def never(cfg) -> int:
    return 0


def no_checks(cfg) -> None:
    """Every value the Config's types allow is valid."""


class Agent(NamedTuple):
    name: str
    Config: type
    init: Callable[..., Any]
    act: Callable[..., Any]
    update: Callable[..., Any]
    loop_defaults: Mapping[str, Any] = MappingProxyType({})
    init_carry: Callable[..., Any] = no_carry
    sample_batch: Callable[..., Any] = sample_transitions
    check_config: Callable[[Any], None] = no_checks
    terminal_obs: bool = False
    refresh: Callable[..., Any] = no_refresh
    refresh_interval: Callable[[Any], int] = never
    sample_with_state: Callable[..., Any] | None = None


def check_config_type(agent: Agent, cfg) -> None:
    """``cfg`` is ``agent``'s Config (or a subclass of it): another agent's config fails far from here otherwise."""
    from jaxrl import ConfigError

    if not isinstance(cfg, agent.Config):
        raise ConfigError(f"the config is a {type(cfg).__module__}.{type(cfg).__qualname__}, not agent "
                          f"{agent.name!r}'s {agent.Config.__module__}.{agent.Config.__qualname__} (another agent's "
                          f"config?): build it with {agent.Config.__qualname__}(...)")


def checked_update(agent_name: str, before, output):
    """``(state, metrics)`` of an update, checked while it is traced (no cost in the compiled program): the loop
    carries the state through ``lax.scan``, which fails deep inside XLA's tracing (dozens of lines) when an update
    returns another structure, a leaf of another shape or dtype, or other than two values. Each is one
    ``ConfigError`` naming the leaf, before anything compiles. Metrics must be scalars: a vector would be averaged
    over its entries without a word, so it is refused (reduce it in the update, e.g. ``jnp.mean``)."""
    import jax
    import jax.numpy as jnp
    import numpy as np

    from jaxrl import ConfigError
    from jaxrl import progress as progress_lib

    if not (isinstance(output, tuple) and len(output) == 2):
        what = (f"a {type(output).__name__} of {len(output)} value(s)" if isinstance(output, (tuple, list))
                else f"a {type(output).__name__}")
        raise ConfigError(f"{agent_name}'s update returned {what}: it must return (state, metrics)")
    state, metrics = output
    flat_before, tree_before = jax.tree_util.tree_flatten_with_path(progress_lib.detach(before))
    try:
        flat_after, tree_after = jax.tree_util.tree_flatten_with_path(progress_lib.detach(state))
    except (AttributeError, TypeError):
        raise ConfigError(f"{agent_name}'s update returned a {type(state).__name__} as its state: it must return "
                          f"the {type(before).__name__} it was given, updated (state.replace(...))") from None
    paths_before = [jax.tree_util.keystr(p) for p, _ in flat_before]
    paths_after = [jax.tree_util.keystr(p) for p, _ in flat_after]
    if paths_before != paths_after:
        changed = sorted(set(paths_before) ^ set(paths_after)) or ["(the same leaves, in another order)"]
        raise ConfigError(f"{agent_name}'s update changes the state's structure (leaves added or removed: "
                          f"{', '.join(changed[:4])}{', ...' if len(changed) > 4 else ''}): it must return the state "
                          "it was given, with every leaf updated in place")
    for path, (_, x), (_, y) in zip(paths_before, flat_before, flat_after, strict=True):
        x, y = jnp.asarray(x), jnp.asarray(y)
        if (x.shape, x.dtype) != (y.shape, y.dtype):
            raise ConfigError(f"{agent_name}'s update changes state leaf {path} from {x.dtype}{list(x.shape)} to "
                              f"{y.dtype}{list(y.shape)}: every leaf must keep its shape and dtype (the loop carries "
                              "the state through a scan)")
    if tree_before != tree_after:
        raise ConfigError(f"{agent_name}'s update changes the state's static fields (its pytree's auxiliary data: "
                          "modules, configs): they must stay what init built")
    if not isinstance(metrics, Mapping):
        raise ConfigError(f"{agent_name}'s update returned a {type(metrics).__name__} as its metrics: it must be a "
                          "dict of scalar arrays ({} for none)")
    for name, value in metrics.items():
        if not isinstance(name, str):
            raise ConfigError(f"{agent_name}'s update returned a metric named {name!r}: names must be strings")
        if isinstance(value, bool) or not isinstance(value, (jax.Array, np.ndarray, np.generic, int, float)):
            raise ConfigError(f"{agent_name}'s update returned metric {name!r} as a {type(value).__name__}: metrics "
                              "must be scalar arrays (numbers computed in the update)")
        if jnp.ndim(value) != 0:
            raise ConfigError(f"{agent_name}'s update returned metric {name!r} of shape {list(jnp.shape(value))}: "
                              "metrics must be scalars (reduce it in the update, e.g. jnp.mean)")
    return state, metrics


def draw_batch(agent: Agent, state, buffer, key, cfg):
    """The batch ``agent.update`` trains on next: ``sample_with_state`` where the agent has one, else
    ``sample_batch`` (what the loop and the harness call)."""
    if agent.sample_with_state is not None:
        return agent.sample_with_state(state, buffer, key, cfg)
    return agent.sample_batch(buffer, key, cfg)
