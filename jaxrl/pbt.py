"""Population-based training (Jaderberg et al. 2017, arXiv 1711.09846) over the members of one compiled program.

A sweep program already holds every member's numeric hyperparameters as [K] leaves of ``TrainState.hparams``, so
PBT's exploit-and-explore is an index gather over the member axis, run inside the compiled program:

  * exploit (truncation selection): rank the members by fitness; each of the ``bottom`` fraction copies one of the
    ``top`` fraction — the i-th worst copies the i-th best (cycling when the top is smaller), a deterministic rule
    a lineage can be read from (Jaderberg et al. draw the parent at random; DexPBT likewise). It takes the parent's
    agent state (networks, optimiser states, targets) and observation statistics, and with ``copy_buffer`` its
    replay buffer; its envs, acting carry and RNG stay its own, so parent and copy diverge from the next step.
  * explore: each explored field of a copying member becomes the parent's value times a factor drawn from
    ``perturb`` (e.g. {0.8, 1.25}), or a fresh draw from ``resample``'s distribution, then clipped to ``bounds``.

Everything here is a pure function of arrays: selection and perturbation are testable on a hand-made fitness vector,
and under ``jit`` with members sharded over devices the ranking is one global sort (XLA gathers the [K] fitness).
"""
from __future__ import annotations

import dataclasses
import functools
import math
from typing import Any

import flax.struct
import jax
import jax.numpy as jnp

from jaxrl import ConfigError

DISTRIBUTIONS = ("uniform", "log_uniform")


@dataclasses.dataclass(frozen=True)
class Explore:
    """How one numeric field moves when its member copies another."""

    field: str
    perturb: tuple[float, ...] = ()  # factors drawn uniformly; empty when ``resample`` is set
    resample: tuple[str, float, float] | None = None  # (distribution, low, high)
    bounds: tuple[float, float] | None = None  # the value is clipped to [low, high] after moving


@dataclasses.dataclass(frozen=True)
class PBTConfig:
    interval: int  # env steps between exploit/explore steps: a multiple of the program's chunk (loop.eval_every)
    explore: tuple[Explore, ...]
    fitness_window: int = 1  # the fitness is the mean of a member's last this-many evaluation returns
    bottom: float = 0.25  # the fraction of the population that copies ...
    top: float = 0.25  # ... from this fraction
    copy_buffer: bool = False  # whether a copying member also takes its parent's replay buffer

    def counts(self, population: int) -> tuple[int, int]:
        """(members that copy, members copied from) in a population of this size."""
        return math.floor(self.bottom * population + 1e-9), math.floor(self.top * population + 1e-9)


def check(cfg: PBTConfig, population: int, chunk_env_steps: int, traced_fields: dict[str, Any],
          check_config=None, configs=()) -> None:
    """One-line ``ConfigError`` for a table that cannot run on this program (before anything compiles).
    ``traced_fields``: the agent Config's numeric traced fields and their member values. With the agent's
    ``check_config`` and the members' ``configs``, also that explore keeps every field inside the values the agent
    accepts (``check_domains``)."""
    bottom, top = cfg.counts(population)
    if bottom < 1 or top < 1 or bottom + top > population:
        raise ConfigError(f"[pbt] bottom = {cfg.bottom} and top = {cfg.top} of a population of {population} give "
                          f"{bottom} copying and {top} copied members: each must be >= 1 and together <= "
                          f"{population} (more members, or larger fractions)")
    if cfg.interval <= 0 or cfg.interval % chunk_env_steps:
        raise ConfigError(f"[pbt] interval = {cfg.interval} must be a positive multiple of the program's chunk of "
                          f"{chunk_env_steps} env steps (loop.eval_every): exploit/explore runs at chunk ends")
    if cfg.fitness_window < 1:
        raise ConfigError(f"[pbt] fitness_window = {cfg.fitness_window} must be >= 1 (evaluations averaged)")
    if not cfg.explore:
        raise ConfigError("[pbt] explores no field: add [pbt.explore] entries (e.g. actor_lr = {perturb = [0.8, "
                          "1.25]})")
    for item in cfg.explore:
        if item.field not in traced_fields:
            raise ConfigError(f"[pbt.explore] {item.field}: not a numeric (traced) field of the agent's Config; "
                              f"explorable: {', '.join(sorted(traced_fields))}")
    if check_config is not None:
        check_domains(cfg, check_config, configs)


# How far a chain of perturbations is followed when no bounds stop it: far enough to leave any domain a field has
# (a discount's 1, an expectile's (0, 1)), near enough to stay a float.
_REACH = 1e12


def reachable(item: Explore, start: float) -> list[float]:
    """Values explore can give a field that starts at ``start``, in order of reach: with ``bounds``, the bounds (and
    the values between them are the agent's to accept, an interval like its domain); without, the chain of the
    largest and of the smallest factor (products of factors lie between), or the resample range's ends."""
    if item.bounds is not None:
        low, high = item.bounds
        if item.resample is not None:
            low, high = max(low, item.resample[1]), min(high, item.resample[2])
        return [low, high]
    if item.resample is not None:
        return [item.resample[1], item.resample[2]]
    values = []
    for factor in {max(item.perturb), min(item.perturb)} - {1.0}:
        value = start
        while start != 0 and 1 / _REACH < abs(value / start) < _REACH:
            value *= factor
            values.append(value)
    return values


def check_domains(cfg: PBTConfig, check_config, configs) -> None:
    """Every value explore can reach from every member's starting value is one the agent's ``check_config``
    accepts: a table that would train a member outside a field's domain (a discount above 1) is refused in one line,
    naming the value and how to keep it inside (bounds)."""
    for item in cfg.explore:
        for member, config in enumerate(configs):
            start = float(getattr(config, item.field))
            for value in reachable(item, start):
                try:
                    check_config(dataclasses.replace(config, **{item.field: value}))
                except ConfigError as e:
                    how = (f"bounds = {list(item.bounds)} reach {value:g}" if item.bounds is not None else
                           f"perturbing member {member}'s {start:g} by {list(item.perturb)} reaches {value:g}"
                           if item.perturb else f"resample {item.resample[0]} = {list(item.resample[1:])} reaches "
                           f"{value:g}")
                    raise ConfigError(f"[pbt.explore] {item.field}: {how}, which the agent refuses ({e}); give "
                                      "bounds = [low, high] inside the values it accepts") from None


def parse(table: dict[str, Any]) -> PBTConfig:
    """The sweep file's ``[pbt]`` table (with its ``[pbt.explore]`` sub-table) as a PBTConfig; one-line errors."""
    known = {"interval", "fitness_window", "bottom", "top", "copy_buffer", "explore"}
    unknown = sorted(set(table) - known)
    if unknown:
        raise ConfigError(f"[pbt] unknown key(s) {', '.join(unknown)}; valid: {', '.join(sorted(known))}")
    if "interval" not in table:
        raise ConfigError("[pbt] needs interval = <env steps between exploit/explore steps>")
    explore = table.get("explore", {})
    if not isinstance(explore, dict):
        raise ConfigError(f"[pbt] explore must be a table of field = {{perturb = [...]}} entries, got {explore!r}")
    for name in ("bottom", "top"):
        value = table.get(name, 0.25)
        if not isinstance(value, (int, float)) or isinstance(value, bool) or not 0 < value < 1:
            raise ConfigError(f"[pbt] {name} = {value!r} must be a fraction in (0, 1)")
    for name in ("interval", "fitness_window"):
        if name in table and (not isinstance(table[name], int) or isinstance(table[name], bool)):
            raise ConfigError(f"[pbt] {name} = {table[name]!r} must be an integer")
    if not isinstance(table.get("copy_buffer", False), bool):
        raise ConfigError(f"[pbt] copy_buffer = {table['copy_buffer']!r} must be true or false")
    return PBTConfig(interval=table["interval"], explore=tuple(_explore(n, s) for n, s in explore.items()),
                     fitness_window=table.get("fitness_window", 1), bottom=float(table.get("bottom", 0.25)),
                     top=float(table.get("top", 0.25)), copy_buffer=table.get("copy_buffer", False))


def _explore(name: str, spec: Any) -> Explore:
    where = f"[pbt.explore] {name}"
    if not isinstance(spec, dict) or not set(spec) <= {"perturb", "resample", "bounds"} or \
            ("perturb" in spec) == ("resample" in spec):
        raise ConfigError(f"{where} = {spec!r}: expected {{perturb = [factors]}} or {{resample = {{uniform | "
                          "log_uniform = [low, high]}}}, optionally with bounds = [low, high]")
    bounds = spec.get("bounds")
    if bounds is not None and not (isinstance(bounds, list) and len(bounds) == 2 and all(
            isinstance(x, (int, float)) for x in bounds) and bounds[0] < bounds[1]):
        raise ConfigError(f"{where}: bounds needs [low, high] with low < high, got {bounds!r}")
    bounds = None if bounds is None else (float(bounds[0]), float(bounds[1]))
    if "perturb" in spec:
        factors = spec["perturb"]
        if not (isinstance(factors, list) and factors and all(
                isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0 for x in factors)):
            raise ConfigError(f"{where}: perturb needs a non-empty list of factors > 0, got {factors!r}")
        return Explore(name, perturb=tuple(float(x) for x in factors), bounds=bounds)
    dist = spec["resample"]
    if not (isinstance(dist, dict) and len(dist) == 1 and next(iter(dist)) in DISTRIBUTIONS):
        raise ConfigError(f"{where}: resample needs {{uniform = [a, b]}} or {{log_uniform = [a, b]}}, got {dist!r}")
    kind, arg = next(iter(dist.items()))
    if not (isinstance(arg, list) and len(arg) == 2 and all(isinstance(x, (int, float)) for x in arg)
            and arg[0] < arg[1] and (kind == "uniform" or arg[0] > 0)):
        raise ConfigError(f"{where}: {kind} needs [low, high] with low < high"
                          + (" and low > 0" if kind == "log_uniform" else "") + f", got {arg!r}")
    return Explore(name, resample=(kind, float(arg[0]), float(arg[1])), bounds=bounds)


# ----------------------------------------------------------------------------------- inside the compiled program


def select_parents(fitness: jax.Array, num_bottom: int, num_top: int) -> jax.Array:
    """parents [K]: parents[i] = i for a member that keeps its own state; for the i-th worst (i < num_bottom) the
    index of the (i mod num_top)-th best. Ties rank by member index (stable sort); NaN fitness ranks lowest."""
    population = fitness.shape[0]
    ranked = jnp.argsort(jnp.where(jnp.isnan(fitness), -jnp.inf, fitness), stable=True)  # worst first
    worst, best = ranked[:num_bottom], ranked[::-1][:num_top]
    return jnp.arange(population).at[worst].set(best[jnp.arange(num_bottom) % num_top])


def gather_members(tree, parents: jax.Array):
    """Every leaf with a leading member axis takes its parent's row; scalars (shared counters) stay."""
    return jax.tree.map(lambda x: x[parents] if jnp.ndim(x) else x, tree)


def explore_values(values: jax.Array, copied: jax.Array, key: jax.Array, item: Explore) -> jax.Array:
    """A field's [K] values after explore: copying members (``copied``) move from their (already gathered)
    value by a random factor of ``item.perturb`` or to a fresh draw of ``item.resample``, then into ``bounds``."""
    if item.perturb:
        factors = jnp.asarray(item.perturb, values.dtype)
        moved = values * factors[jax.random.randint(key, values.shape, 0, len(item.perturb))]
    else:
        kind, low, high = item.resample
        u = jax.random.uniform(key, values.shape, values.dtype)
        moved = (low + (high - low) * u if kind == "uniform"
                 else jnp.exp(math.log(low) + (math.log(high) - math.log(low)) * u))
    if item.bounds is not None:
        moved = jnp.clip(moved, *item.bounds)
    return jnp.where(copied, moved, values)


def exploit_and_explore(hparams, fitness: jax.Array, keys: jax.Array, cfg: PBTConfig):
    """(parents [K], new hparams): the gathered hparams with every explored field moved for the copying members.
    ``keys`` [K, 2]: each member draws its own moves (so the draws follow the member axis when it is sharded)."""
    num_bottom, num_top = cfg.counts(fitness.shape[0])
    parents = select_parents(fitness, num_bottom, num_top)
    copied = parents != jnp.arange(fitness.shape[0])
    hparams = gather_members(hparams, parents)
    field_keys = jax.vmap(lambda k: jax.random.split(k, len(cfg.explore)))(keys)  # [K, fields, 2]
    moved = {item.field: jax.vmap(functools.partial(explore_values, item=item))(
        getattr(hparams, item.field), copied, field_keys[:, i]) for i, item in enumerate(cfg.explore)}
    return parents, hparams.replace(**moved)


# ------------------------------------------------------------------------------------------- the loop's step


@flax.struct.dataclass
class PBTState:
    """What PBT keeps in the TrainState (so a run checkpoints and resumes it exactly): per member."""

    returns: jax.Array  # [K, fitness_window] its last evaluation returns, newest last (NaN before there are any)
    key: jax.Array  # [K, 2] its explore draws


def init_state(member_keys: jax.Array, cfg: PBTConfig) -> PBTState:
    """Each member's explore key comes from its own key and its index (members sharing a seed draw apart)."""
    population = member_keys.shape[0]
    keys = jax.vmap(lambda k, i: jax.random.fold_in(jax.random.fold_in(k, 0x9B7), i))(
        member_keys, jnp.arange(population))
    return PBTState(returns=jnp.full((population, cfg.fitness_window), jnp.nan, jnp.float32), key=keys)


def fitness(returns: jax.Array) -> jax.Array:
    """[K]: the mean of each member's recorded evaluation returns (NaN while it has none)."""
    seen = ~jnp.isnan(returns)
    return jnp.where(seen.any(-1), jnp.sum(jnp.where(seen, returns, 0.0), -1) / jnp.maximum(seen.sum(-1), 1), jnp.nan)


def step(cfg: PBTConfig, state, eval_return: jax.Array, due: jax.Array):
    """At a chunk's end: record the evaluation, and when ``due`` exploit and explore. ``state`` is the loop's
    TrainState (``state.pbt`` a PBTState). Returns (state, metrics) with ``pbt/parent`` (each member's own index
    when it did not copy or nothing was due), ``pbt/fitness`` and ``hparams/<field>`` of every explored field."""
    returns = jnp.concatenate([state.pbt.returns[:, 1:], eval_return[:, None].astype(jnp.float32)], axis=1)
    split = jax.vmap(jax.random.split)(state.pbt.key)
    state = state.replace(pbt=PBTState(returns=returns, key=split[:, 0]))
    population = eval_return.shape[0]
    score = fitness(returns)

    def exploit(state):
        parents, hparams = exploit_and_explore(state.hparams, score, split[:, 1], cfg)
        copied = dict(agent=gather_members(state.agent, parents),
                      normalizers=gather_members(state.normalizers, parents), hparams=hparams)
        if cfg.copy_buffer:
            copied["buffer"] = gather_members(state.buffer, parents)
        return state.replace(**copied), parents

    state, parents = jax.lax.cond(due, exploit, lambda s: (s, jnp.arange(population)), state)
    metrics = {"pbt/parent": parents, "pbt/fitness": score, "pbt/due": due}
    metrics.update({f"hparams/{item.field}": getattr(state.hparams, item.field) for item in cfg.explore})
    return state, metrics


# ------------------------------------------------------------------------------------------- on the host


def as_table(cfg: PBTConfig) -> dict[str, Any]:
    """The canonical ``[pbt]`` table of a config (every key written out): ``parse(as_table(cfg)) == cfg``. Run
    directories record it, and sweep member ids hash it, so a table that omits a default is the same table."""
    explore = {}
    for item in cfg.explore:
        spec: dict[str, Any] = ({"perturb": list(item.perturb)} if item.perturb
                                else {"resample": {item.resample[0]: list(item.resample[1:])}})
        if item.bounds is not None:
            spec["bounds"] = list(item.bounds)
        explore[item.field] = spec
    return {"interval": cfg.interval, "fitness_window": cfg.fitness_window, "bottom": cfg.bottom, "top": cfg.top,
            "copy_buffer": cfg.copy_buffer, "explore": explore}


def from_saved(saved: dict[str, Any]) -> PBTConfig | None:
    """The PBT config a run directory's ``config.json`` records (None for a run without PBT)."""
    return None if saved.get("pbt") is None else parse(saved["pbt"])


def lineage(rows: list[dict[str, Any]], cfg: PBTConfig, label: str = "member") -> list[dict[str, Any]]:
    """``pbt.csv``'s rows from a program's logged metric rows: per exploit/explore step and member (in member
    order), the env step, the member's fitness, its parent (itself when it kept its own state), whether it copied,
    and every explored field's value after the step."""
    from jaxrl.logging import member_values

    out = []
    for row in rows:
        if not row.get("pbt/due"):
            continue
        parents = member_values(row, "pbt/parent")
        score = member_values(row, "pbt/fitness")
        values = {item.field: member_values(row, f"hparams/{item.field}") for item in cfg.explore}
        for k, parent in enumerate(parents):
            out.append({"env_steps": row["env_steps"], label: k, "fitness": score[k], "parent": int(parent),
                        "copied": int(parent) != k, **{name: v[k] for name, v in values.items()}})
    return out


def schedule(rows: list[dict[str, Any]], member: int, cfg: PBTConfig, initial: list[dict[str, float]],
             final_env_steps: int) -> list[dict[str, Any]]:
    """The hyperparameters the networks ending in ``member`` trained with, oldest first, following its ancestry
    back: a copy at env step t means that before t the weights were the parent's. One entry per stretch of env
    steps (from, to], with the member slot that trained them and the explored fields' values it had meanwhile.
    ``initial``: each member's explored values before the first step."""
    by_step = {(r["env_steps"], r["member"]): r for r in lineage(rows, cfg)}
    events = sorted({step for step, _ in by_step if step <= final_env_steps})
    slot, end, entries = member, final_env_steps, []
    for step in reversed(events):
        row = by_step[(step, slot)]
        if end > step:
            entries.append({"from_env_steps": step, "to_env_steps": end, "member": slot,
                            "values": {item.field: row[item.field] for item in cfg.explore}})
        slot, end = row["parent"], step
    if end > 0:
        entries.append({"from_env_steps": 0, "to_env_steps": end, "member": slot, "values": dict(initial[slot])})
    return entries[::-1]
