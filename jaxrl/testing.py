"""A harness for new agents: ``check_agent(agent)`` runs in seconds on a CPU, before a run costs GPU hours.

    from jaxrl.testing import check_agent
    check_agent(my_agent, my_agent.Config(hidden_sizes=(32, 32), batch_size=64))   # raises AgentCheckError

Each check fails with ``AgentCheckError`` naming what broke; ``check_agent`` returns the seconds each took. The
checks, in order (the update is called as the loop calls it: real batches from a replay buffer the agent's own
``sample_batch`` draws from, numeric config fields traced, ``state.progress`` set):

``shapes``       the update keeps every state leaf's shape and dtype (a leaf that changes shape recompiles the
                 loop's program, or fails inside its scan);
``compile``      the jitted update is traced once over calls with new batches, keys and progress, its output fed
                 back in (a retrace would compile the loop's program again);
``pure``         the same inputs give bitwise the same outputs, jitted and eagerly, and jit equals eager; two traces
                 under other Python / NumPy random states give the same program and constants (a Python side
                 effect or host randomness under jit breaks this);
``gradients``    the losses stay finite and the parameters move on random batches and on edge cases: all
                 terminated, all truncated, rewards of +-1e3, actions at the bounds;
``batch``        two different batches move the parameters differently (a loss that ignores its batch does not);
``targets``      target networks (``target*params`` fields) move over a few updates when the config's ``tau`` > 0;
``statistics``   running statistics (``batch_stats``) move over a few updates (their loss returns them as
                 ``aux[NETWORK_STATE]``);
``vmap``         vmapped over seeds and over every numeric hyperparameter at once (what ``--seeds`` and a sweep
                 program do), each member equals its own call;
``refresh``      (agents with a ``refresh`` hook) on a filled buffer it keeps every leaf's shape and dtype, is
                 bitwise repeatable, and vmapped over two members equals each member's own call;
``checkpoint``   the state survives a checkpoint round-trip bitwise, and an update at a given progress after it
                 equals the same update before it;
``probes``       (with ``probes=True``) toy/Bandit: Q = r and the best action 0.5; toy/ConstantTruncated:
                 bootstrapping through time limits gives Q = 1 / (1 - gamma), and the negative control (time
                 limits fed as terminations) does not (``q_fn`` reads the agent's Q estimates).
"""
from __future__ import annotations

import dataclasses
import functools
import random
import re
import tempfile
import time
from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from jaxrl import progress as progress_lib
from jaxrl.agent import check_config_type, checked_init, checked_update


class AgentCheckError(AssertionError):
    """A check of ``check_agent`` failed; the message names the check and what broke."""


def _fail(check: str, message: str):
    raise AgentCheckError(f"[{check}] {message}")


def _paths(tree) -> list[tuple[str, Any]]:
    return [(jax.tree_util.keystr(path), leaf) for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]]


def _first_difference(a, b, exact: bool = True, rtol: float = 1e-4, atol: float = 1e-5) -> str | None:
    """The path of the first leaf where ``a`` and ``b`` differ (bitwise, or beyond the tolerance); None if none."""
    for (path, x), (_, y) in zip(_paths(a), _paths(b), strict=True):
        x, y = np.asarray(x), np.asarray(y)
        same = np.array_equal(x, y, equal_nan=True) if exact or not np.issubdtype(x.dtype, np.floating) \
            else np.allclose(x, y, rtol=rtol, atol=atol, equal_nan=True)
        if not same:
            return path
    return None


def _traced(cfg):
    """``cfg`` as the loop passes it: its numeric fields as arrays (static fields stay Python values)."""
    return jax.tree.map(jnp.asarray, cfg)


def _param_paths(state) -> list[str]:
    """The state's trained parameters: leaves under a field named ``*params`` but not ``target*`` (any float leaf
    where no field is so named)."""
    names = [path for path, leaf in _paths(state) if jnp.issubdtype(jnp.asarray(leaf).dtype, jnp.floating)]
    params = [p for p in names if any(field.endswith("params") and not field.startswith("target")
                                      for field in re.findall(r"\.(\w+)", p))]
    return params or names


@dataclasses.dataclass
class _Setup:
    agent: Any
    cfg: Any
    program: Any
    state: Any  # one seed's agent state (progress None)
    states: Any  # two seeds' agent states, stacked (the first is ``state``)
    batches: list  # real batches of the agent's own type, drawn from a filled buffer
    progress: Callable  # (updates, env_steps) -> Progress
    buffer: Any = None  # the filled buffer the batches came from (``refresh`` reads it)
    traces: list = dataclasses.field(default_factory=list)  # one entry per trace of ``update``

    @functools.cached_property
    def update(self):
        """The jitted update every check shares (one compile): (state, batch, key, cfg, updates) -> (state,
        metrics), ``updates`` an int32 array; it notes each trace in ``traces``."""
        def counted(state, batch, key, cfg, updates):
            self.traces.append(1)
            return _update(self, state, batch, key, cfg, updates)

        return jax.jit(counted)

    def call(self, state, batch, key, updates: int = 10):
        return jax.device_get(self.update(state, batch, key, _traced(self.cfg), jnp.asarray(updates, jnp.int32)))


def _setup(agent, cfg, env_name: str, seed: int) -> _Setup:
    import envs
    from jaxrl import loop as loop_lib
    from jaxrl.agent import draw_batch

    loop = loop_lib.LoopConfig(steps=1000, num_envs=4, num_eval_envs=1, eval_every=500, learning_starts=200,
                               buffer_size=2000, **{k: v for k, v in agent.loop_defaults.items()
                                                    if k in ("n_step",)})
    # The program gives the buffer, envs and progress; its metric shapes would trace the update inside the loop's
    # scan, where a broken update fails before a check can name what broke: an identity update stands in.
    stand_in = agent._replace(update=lambda state, batch, key, cfg: (state, {}))
    program = loop_lib.describe(stand_in, envs.make(env_name, loop.num_envs), envs.make(env_name, 1), loop, cfg)
    key = jax.random.PRNGKey(seed)

    @jax.jit
    def filled(key):
        # lax.map, not vmap: XLA:CPU never finishes SimbaV2's critic init vmapped over 2+ seeds (jaxrl/loop.py).
        states = jax.lax.map(lambda k: checked_init(agent, k, program.spec, cfg),
                             jnp.stack([key, jax.random.fold_in(key, 2)]))
        one = loop_lib.init_seed(program, key, cfg)
        env_state, buffer = one["env"], one["buffer"]

        def step(carry, key):
            env_state, buffer = carry
            action = jax.random.uniform(key, (loop.num_envs, program.spec.action_size), minval=-1.0, maxval=1.0)
            env_state, buffer, _, _ = loop_lib.collect(program, env_state, buffer, one["normalizers"], action, cfg)
            return (env_state, buffer), None

        (env_state, buffer), _ = jax.lax.scan(step, (env_state, buffer), jax.random.split(key, 100))
        return states, buffer

    states, buffer = filled(key)
    state = _member(states, 0)
    sample = jax.jit(lambda key: draw_batch(agent, progress_lib.attach(state, program.progress(10, 10)), buffer, key,
                                            cfg))
    batches = [sample(k) for k in jax.random.split(jax.random.fold_in(key, 1), 3)]
    return _Setup(agent, cfg, program, state, states, batches, program.progress, buffer)


def _update(setup: _Setup, state, batch, key, cfg, updates: int = 10, update_fn=None):
    """One update as the loop calls it, with ``state.progress`` at ``updates``; returns (state, metrics)."""
    fn = update_fn or setup.agent.update
    now = setup.progress(updates, setup.program.first_update_env_step + updates)
    attached = progress_lib.attach(state, now)
    new_state, metrics = checked_update(setup.agent.name, attached, fn(attached, batch, key, cfg))
    return progress_lib.detach(new_state), metrics


def check_shapes(setup: _Setup) -> None:
    """What the loop checks while tracing (``jaxrl.agent.checked_update``): two values, the state's structure,
    every leaf's shape and dtype, scalar metrics."""
    from jaxrl import ConfigError

    try:
        jax.eval_shape(functools.partial(_update, setup), setup.state, setup.batches[0], jax.random.PRNGKey(0),
                       _traced(setup.cfg))
    except ConfigError as e:
        _fail("shapes", str(e))


def check_compiles_once(setup: _Setup) -> None:
    state, traces = setup.state, len(setup.traces)
    # Before and after learning starts, later in the run, each on a new batch and key, the state fed back in.
    for k, updates in enumerate((0, 1, 5_000)):
        state, _ = setup.update(state, setup.batches[k % len(setup.batches)], jax.random.PRNGKey(k),
                                _traced(setup.cfg), jnp.asarray(updates, jnp.int32))
    if len(setup.traces) - traces != 1:
        weak = [p for (p, x), (_, y) in zip(_paths(setup.state), _paths(state), strict=True)
                if getattr(jnp.asarray(x), "weak_type", False) != getattr(y, "weak_type", False)]
        hint = f" (weakly typed leaves change: {', '.join(weak[:3])})" if weak else ""
        _fail("compile", f"the jitted update was traced {len(setup.traces) - traces} times over 3 calls: each "
                         f"retrace compiles the loop's program again{hint}")


def check_pure(setup: _Setup, eager: bool = True) -> None:
    args = (setup.state, setup.batches[0], jax.random.PRNGKey(3))
    first, second = setup.call(*args), setup.call(*args)
    where = _first_difference(first, second)
    if where is not None:
        _fail("pure", f"two jitted calls on the same inputs differ in {where}")
    # Traced again, a side effect (a counter, host randomness, a global read) gives another program. Each trace
    # starts from another Python / NumPy random state, and the programs' constants are compared too: a value drawn
    # from np.random at tracing is frozen into the program as a constant, which the program's text does not show.
    programs, python_state, numpy_state = [], random.getstate(), np.random.get_state()
    try:
        for host_seed in (0, 1):
            random.seed(host_seed)
            np.random.seed(host_seed)
            # a new function object each time: make_jaxpr caches traces by function
            programs.append(jax.make_jaxpr(functools.partial(_update, setup))(*args, _traced(setup.cfg), 10))
    finally:
        random.setstate(python_state)
        np.random.set_state(numpy_state)
    texts = [str(p) for p in programs]
    if texts[0] != texts[1]:
        line = next(a for a, b in zip(texts[0].splitlines(), texts[1].splitlines(), strict=False) if a != b)
        _fail("pure", f"two traces of the update give different programs (first difference: {line.strip()[:80]}): "
                      "a Python side effect or host randomness in the update, which under jit runs once, at tracing")
    for first_const, second_const in zip(programs[0].consts, programs[1].consts, strict=True):
        if not np.array_equal(np.asarray(first_const), np.asarray(second_const), equal_nan=True):
            _fail("pure", "two traces of the update, under other Python / NumPy random states, bake different "
                          f"constants into the program (one of shape {list(np.shape(first_const))}): host randomness "
                          "(np.random, random) drawn while tracing is frozen into the program; draw from the update's "
                          "key (jax.random) instead")
    if not eager:
        return
    with jax.disable_jit():
        eager_out = jax.device_get(_update(setup, *args, _traced(setup.cfg), 10))
    where = _first_difference(first, eager_out, exact=False)
    if where is not None:
        _fail("pure", f"the jitted update differs from the eager one in {where}: a Python side effect or a value "
                      "read at tracing time (under jit it is frozen into the program)")


def _edge_cases(batch) -> dict[str, Any]:
    cases = {"a random batch": batch}
    ones = lambda x: jnp.ones_like(x)  # noqa: E731
    if hasattr(batch, "terminated"):
        cases["an all-terminated batch"] = batch.replace(terminated=ones(batch.terminated),
                                                         truncated=jnp.zeros_like(batch.truncated))
        cases["an all-truncated batch"] = batch.replace(truncated=ones(batch.truncated),
                                                        terminated=jnp.zeros_like(batch.terminated))
    if hasattr(batch, "reward"):
        cases["rewards of +1e3"] = batch.replace(reward=jnp.full_like(batch.reward, 1e3))
        cases["rewards of -1e3"] = batch.replace(reward=jnp.full_like(batch.reward, -1e3))
    if hasattr(batch, "action"):
        signs = jnp.where(jnp.arange(batch.action.shape[-1]) % 2 == 0, 1.0, -1.0)
        cases["actions at the bounds"] = batch.replace(action=jnp.broadcast_to(signs, batch.action.shape))
    return cases


def check_gradients(setup: _Setup) -> None:
    params = _param_paths(setup.state)
    for name, batch in _edge_cases(setup.batches[0]).items():
        state, metrics = setup.call(setup.state, batch, jax.random.PRNGKey(4))
        bad = [f"{metric}={np.asarray(value).tolist()}" for metric, value in sorted(metrics.items())
               if not np.all(np.isfinite(value))]
        if bad:
            _fail("gradients", f"non-finite metrics on {name}: {', '.join(bad)}")
        for path, leaf in _paths(state):
            if np.issubdtype(np.asarray(leaf).dtype, np.floating) and not np.all(np.isfinite(leaf)):
                _fail("gradients", f"state leaf {path} is not finite after an update on {name}")
        before = dict(_paths(jax.device_get(setup.state)))
        after = dict(_paths(state))
        if all(np.array_equal(before[p], after[p]) for p in params):
            _fail("gradients", f"no parameter moved in an update on {name}: the gradients are all zero")


def check_uses_batch(setup: _Setup) -> None:
    start = dict(_paths(jax.device_get(setup.state)))
    one = dict(_paths(setup.call(setup.state, setup.batches[0], jax.random.PRNGKey(5))[0]))
    other = dict(_paths(setup.call(setup.state, setup.batches[1], jax.random.PRNGKey(5))[0]))
    groups: dict[str, list[str]] = {}
    for path in _param_paths(setup.state):
        groups.setdefault(re.match(r"\.?(\w+)", path).group(1), []).append(path)
    for group, paths in groups.items():
        moved = any(not np.array_equal(start[p], one[p]) for p in paths)
        if moved and all(np.array_equal(one[p], other[p]) for p in paths):
            _fail("batch", f"two different batches moved {group} identically: its loss ignores the batch")


def _several_updates(setup: _Setup) -> list:
    """The states after each of a few updates, the state fed back in: enough for a delayed network (the actor of
    TD3, CrossQ, REDQ) to take at least one step."""
    count = min(max(4, int(getattr(setup.cfg, "policy_delay", 1))), 32)
    state, states = setup.state, []
    for k in range(count):
        state, _ = setup.call(state, setup.batches[k % len(setup.batches)], jax.random.PRNGKey(100 + k), updates=10 + k)
        states.append(state)
    return states


def _fields_moved(before, states, select) -> dict[str, bool]:
    """{state field: whether any of its leaves that ``select(path)`` picks changed in any of ``states``}."""
    start = dict(_paths(jax.device_get(before)))
    later = [dict(_paths(s)) for s in states]
    moved: dict[str, bool] = {}
    for path in filter(select, start):
        field = re.match(r"\.?(\w+)", path).group(1)
        moved[field] = moved.get(field, False) or any(not np.array_equal(start[path], s[path]) for s in later)
    return moved


def check_targets_move(setup: _Setup) -> None:
    """Target networks (fields ``target*params``) move when the config's Polyak rate ``tau`` is above 0."""
    tau = getattr(setup.cfg, "tau", None)
    if tau is None or not float(tau) > 0:
        return
    states = _several_updates(setup)
    moved = _fields_moved(setup.state, states, lambda p: re.match(r"\.?target\w*params", p) is not None)
    frozen = [field for field, changed in moved.items() if not changed]
    if frozen:
        _fail("targets", f"{', '.join(frozen)} never moved over {len(states)} updates with tau={float(tau)}: the "
                         "Polyak step is missing or writes the old values back (polyak_update's result must enter the "
                         "state)")


def check_statistics_move(setup: _Setup) -> None:
    """Networks with running statistics (a ``batch_stats`` collection) update them in training passes."""
    if not any("['batch_stats']" in path for path, _ in _paths(setup.state)):
        return
    states = _several_updates(setup)
    moved = _fields_moved(setup.state, states,
                          lambda p: "['batch_stats']" in p and not re.match(r"\.?target", p))
    frozen = [field for field, changed in moved.items() if not changed]
    if frozen:
        _fail("statistics", f"the batch statistics of {', '.join(frozen)} never changed over {len(states)} updates: "
                            "their loss must run a training pass (jaxrl.networks.forward(..., train=True)) and return "
                            "its new statistics as aux[jaxrl.optim.NETWORK_STATE], which gradient_step writes back")


def _numeric_fields(cfg) -> list[str]:
    return [f.name for f in dataclasses.fields(cfg) if f.metadata.get("pytree_node", True)
            and isinstance(getattr(cfg, f.name), (int, float)) and not isinstance(getattr(cfg, f.name), bool)]


def _perturbed(cfg, fields, factor: float):
    """``cfg`` with each of ``fields`` moved a little (floats scaled, ints shifted), kept valid where it can be."""
    values = {}
    for name in fields:
        value = getattr(cfg, name)
        values[name] = value + 1 if isinstance(value, int) else value * factor if value not in (0.0, 1.0) \
            else value + (0.01 if value == 0.0 else -0.01)
    return cfg.replace(**values)


def _member(tree, k: int):
    return jax.tree.map(lambda x: x[k], tree)


def check_vmaps(setup: _Setup) -> None:
    """One vmapped call over two members, each with its own initial state, batch, key and hyperparameters (every
    numeric field moved in the second); each member must equal its own call. On a failure, seeds alone and then
    each field alone name the culprit."""
    members = [setup.cfg]
    fields = _numeric_fields(setup.cfg)
    moved = _perturbed(setup.cfg, fields, 0.9)
    try:
        setup.agent.check_config(moved)
        members.append(moved)
    except Exception:  # noqa: BLE001 - a moved value the agent refuses: its fields are tried one by one on failure
        members.append(setup.cfg)
    problem = _vmap_difference(setup, members)
    if problem is None:
        return
    if members[1] is not setup.cfg:
        seeds_only = _vmap_difference(setup, [setup.cfg, setup.cfg])
        if seeds_only is not None:
            _fail("vmap", f"vmapped over seeds (--seeds K), {seeds_only}")
        for name in fields:
            other = _perturbed(setup.cfg, [name], 0.9)
            try:
                setup.agent.check_config(other)
            except Exception:  # noqa: BLE001
                continue
            found = _vmap_difference(setup, [setup.cfg, other])
            if found is not None:
                _fail("vmap", f"vmapped over hyperparameters (a sweep program) where {name} differs, {found}")
    _fail("vmap", f"vmapped over seeds and hyperparameters, {problem}")


def _vmap_difference(setup: _Setup, configs) -> str | None:
    """How a vmapped update of two members (``setup.states``, two batches and keys, ``configs``) differs from each
    member's own update; None where it does not."""
    stack = lambda *x: jnp.stack([jnp.asarray(v) for v in x])  # noqa: E731
    states = setup.states
    batches = jax.tree.map(stack, setup.batches[0], setup.batches[1])
    keys = jax.random.split(jax.random.PRNGKey(6), 2)
    cfgs = jax.tree.map(stack, *configs)
    updates = jnp.asarray(10, jnp.int32)
    try:
        together = jax.device_get(jax.jit(jax.vmap(functools.partial(_update, setup), in_axes=(0, 0, 0, 0, None)))(
            states, batches, keys, cfgs, updates))
    except (jax.errors.TracerBoolConversionError, jax.errors.ConcretizationTypeError) as e:
        return (f"the update fails ({type(e).__name__}): a Python branch or shape on a numeric field, which is "
                "traced there; use jnp.where / lax.cond, or make the field static")
    for k, cfg in enumerate(configs):
        member = functools.partial(_member, k=k)
        alone = jax.device_get(setup.update(member(states), member(batches), keys[k], _traced(cfg), updates))
        where = _first_difference(member(together), alone, exact=False)
        if where is not None:
            return f"member {k} differs from its own update in {where}"
    return None


def check_refresh(setup: _Setup) -> None:
    """An agent with a ``refresh`` hook: on the filled buffer it keeps every state leaf's shape and dtype, gives the
    same state twice (bitwise), and vmapped over two members (own states, keys and moved numeric fields) each
    member's own result. Agents without one pass at once."""
    from jaxrl.agent import no_refresh

    if setup.agent.refresh is no_refresh:
        return
    now = setup.progress(10, setup.program.first_update_env_step + 10)

    def refreshed(state, buffer, key, cfg):
        return progress_lib.detach(setup.agent.refresh(progress_lib.attach(state, now), buffer, key, cfg))

    def alone(state, key, cfg):
        return jax.device_get(jax.jit(refreshed)(state, setup.buffer, key, _traced(cfg)))

    out = alone(setup.state, jax.random.PRNGKey(8), setup.cfg)
    before, after = _paths(setup.state), _paths(out)
    def signature(leaves):
        return [(path, jnp.asarray(x).shape, jnp.asarray(x).dtype) for path, x in leaves]

    kept = signature(before) == signature(after)
    if not kept:
        _fail("refresh", "refresh changes the state's structure, a leaf's shape or its dtype: the loop's scan needs "
                         "every leaf to keep them")
    where = _first_difference(out, alone(setup.state, jax.random.PRNGKey(8), setup.cfg))
    if where is not None:
        _fail("refresh", f"two calls of refresh on the same inputs differ in {where}: a side effect or an unkeyed "
                         "random draw")
    moved = _perturbed(setup.cfg, _numeric_fields(setup.cfg), 0.9)
    try:
        setup.agent.check_config(moved)
    except Exception:  # noqa: BLE001 - a moved value the agent refuses: the members then differ by seed alone
        moved = setup.cfg
    configs, keys = [setup.cfg, moved], jax.random.split(jax.random.PRNGKey(9), 2)
    cfgs = jax.tree.map(lambda *x: jnp.stack([jnp.asarray(v) for v in x]), *configs)
    together = jax.device_get(jax.jit(jax.vmap(refreshed, in_axes=(0, None, 0, 0)))(setup.states, setup.buffer,
                                                                                     keys, cfgs))
    for k, cfg in enumerate(configs):
        where = _first_difference(_member(together, k), alone(_member(setup.states, k), keys[k], cfg), exact=False)
        if where is not None:
            _fail("refresh", f"vmapped over two members, member {k} differs from its own refresh in {where}")


def check_checkpoint(setup: _Setup) -> None:
    from jaxrl import checkpoint

    state, _ = setup.call(setup.state, setup.batches[0], jax.random.PRNGKey(7))
    with tempfile.TemporaryDirectory() as directory:
        manager = checkpoint.manager(directory)
        checkpoint.save(manager, 1, state)
        restored, _ = checkpoint.restore(directory, jax.eval_shape(lambda: state))
    where = _first_difference(jax.device_get(state), jax.device_get(restored))
    if where is not None:
        _fail("checkpoint", f"the state's leaf {where} changed in a checkpoint round-trip")
    args = (setup.batches[1], jax.random.PRNGKey(8), 12_345)
    where = _first_difference(setup.call(state, *args), setup.call(restored, *args))
    if where is not None:
        _fail("checkpoint", f"an update at 12,345 updates differs after a checkpoint round-trip in {where}")


PROBE_STEPS = 3000
TRUE_Q, STOPPED_Q = 1 / (1 - 0.9), 1 / (1 - 0.81)  # gamma 0.9: bootstrapping through time limits, or stopping


def check_probes(agent, cfg, q_fn: Callable | None, truncated_cfg=None, seed: int = 0, atol: float = 0.7) -> None:
    """toy/Bandit (one step, reward 1 - (a - 0.5)^2): the deterministic action is 0.5 and, with ``q_fn``,
    Q(s, a) = r(a). toy/ConstantTruncated (reward 1, time limit every 10 steps, gamma 0.9): with ``q_fn``, Q = 10
    when time limits bootstrap and about 5.26 when the same agent is fed them as terminations (the negative
    control: the probe can tell the two apart). ``truncated_cfg`` is ``cfg`` with gamma 0.9 unless given."""
    import math

    import envs
    from jaxrl.loop import LoopConfig, make_train
    from jaxrl.types import EnvSpec

    loop = LoopConfig(steps=PROBE_STEPS, num_envs=8, num_eval_envs=2, eval_every=1000, learning_starts=500,
                      buffer_size=3000)

    def trained(env_name, agent, cfg):
        trainer = make_train(agent, envs.make(env_name, loop.num_envs), envs.make(env_name, loop.num_eval_envs),
                             loop, cfg)
        state = trainer.init(seed, 1)
        for _ in range(math.ceil(loop.steps / trainer.schedule.chunk_env_steps)):
            state, metrics = trainer.run_chunk(state)
        return progress_lib.attach(jax.tree.map(lambda x: x[0], state.agent), trainer.program.progress(0, 0)), metrics

    one = trained("toy/Bandit", agent, cfg)[0]
    carry = agent.init_carry(1, EnvSpec(obs_size=1, action_size=1, decisions_per_episode=1), cfg)
    best = float(agent.act(one, jnp.ones((1, 1)), jax.random.PRNGKey(0), cfg, True, carry)[0][0, 0])
    if abs(best - 0.5) > 0.1:
        _fail("probes", f"toy/Bandit: the deterministic action is {best:.3f} after {PROBE_STEPS} env steps; the best "
                        "action is 0.5 (the actor does not follow the critic's maximum?)")
    if q_fn is None:
        return
    actions = jnp.array([[-0.5], [0.0], [0.5], [0.9]])
    q = np.asarray(q_fn(one, jnp.ones((4, 1)), actions))
    reward = 1 - (np.asarray(actions[:, 0]) - 0.5) ** 2
    if not np.allclose(q, np.broadcast_to(reward, q.shape), atol=0.15):
        _fail("probes", f"toy/Bandit: Q at actions -0.5, 0, 0.5, 0.9 is {np.round(q, 3).tolist()}, the rewards "
                        f"{np.round(reward, 3).tolist()} (a one-step episode's Q is its reward)")
    truncated_cfg = truncated_cfg if truncated_cfg is not None else cfg.replace(gamma=0.9)
    obs, actions = jnp.ones((3, 1)), jnp.array([[-0.5], [0.0], [0.5]])
    bootstrapped = np.asarray(q_fn(trained("toy/ConstantTruncated", agent, truncated_cfg)[0], obs, actions))
    if not np.allclose(bootstrapped, TRUE_Q, atol=atol):
        _fail("probes", f"toy/ConstantTruncated: Q is {np.round(bootstrapped, 2).tolist()}, not {TRUE_Q:.1f}: time "
                        "limits must bootstrap (only `terminated` stops the target)")

    def time_limits_as_terminations(state, batch, key, cfg):
        return agent.update(state, batch.replace(terminated=batch.terminated | batch.truncated), key, cfg)

    control = agent._replace(update=time_limits_as_terminations)
    stopped = np.asarray(q_fn(trained("toy/ConstantTruncated", control, truncated_cfg)[0], obs, actions))
    if np.allclose(stopped, TRUE_Q, atol=atol):
        _fail("probes", f"toy/ConstantTruncated's negative control (time limits fed as terminations) also learns Q = "
                        f"{np.round(stopped, 2).tolist()}: the probe cannot tell the two apart with this agent")


CHECKS = {"shapes": check_shapes, "compile": check_compiles_once, "pure": check_pure, "gradients": check_gradients,
          "batch": check_uses_batch, "targets": check_targets_move, "statistics": check_statistics_move,
          "vmap": check_vmaps, "refresh": check_refresh, "checkpoint": check_checkpoint}


def check_agent(agent, cfg=None, *, env: str = "toy/Pendulum", q_fn: Callable | None = None, probes: bool = False,
                truncated_cfg=None, seed: int = 0, skip: tuple[str, ...] = (), eager: bool = True
                ) -> dict[str, float]:
    """Run every check on ``agent`` with ``cfg`` (default ``agent.Config()``; small widths keep it fast) on batches
    from ``env``; ``probes=True`` also trains the probes (a minute or so). ``eager=False`` leaves out the eager
    call of ``pure`` (its first call in a process compiles every operation alone: 10-30 s on a CPU; the two traces
    compared there still catch side effects). Returns {check: seconds}; raises ``AgentCheckError`` (its message
    starts with the check's name) at the first failure."""
    from jaxrl import ConfigError

    cfg = agent.Config() if cfg is None else cfg
    try:
        check_config_type(agent, cfg)
        agent.check_config(cfg)
    except ConfigError as e:
        _fail("config", str(e))
    unknown = set(skip) - set(CHECKS) - {"probes"}
    if unknown:
        raise ValueError(f"skip={sorted(unknown)}: checks are {', '.join([*CHECKS, 'probes'])}")
    t0 = time.perf_counter()
    try:
        setup = _setup(agent, cfg, env, seed)
    except ConfigError as e:  # a State whose fields clash (jaxrl.agent.checked_init)
        _fail("state", str(e))
    seconds = {"setup": time.perf_counter() - t0}
    for name, check in CHECKS.items():
        if name in skip:
            continue
        t0 = time.perf_counter()
        check(setup, eager) if name == "pure" else check(setup)
        seconds[name] = time.perf_counter() - t0
    if probes and "probes" not in skip:
        t0 = time.perf_counter()
        check_probes(agent, cfg, q_fn, truncated_cfg, seed)
        seconds["probes"] = time.perf_counter() - t0
    return seconds
