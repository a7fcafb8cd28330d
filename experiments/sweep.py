"""Sweeps: ``jaxrl sweep FILE.toml [--out DIR] [--launcher local|slurm|ray] [--dry-run]``.

A sweep file is TOML (like the named configs in ``experiments/configs/``)::

    agent = "sac"                       # or taken from `config`
    config = "sac_dmc"                  # optional base: a named config or a .toml path
    envs = ["dmc/CartpoleSwingup"]      # default: the base config's env
    seeds = 4                           # 4 -> seeds 0..3, or an explicit list [0, 1, 7]
    sweep_seed = 0                      # draws of [random]

    [run]            # base overrides, as in a config file
    [loop]
    [agent_config]

    [grid]           # every combination; "section.field" keys, a bare name means agent_config.<name>
    actor_lr = [1e-4, 3e-4]
    "loop.num_envs" = [8, 16]

    [random]         # `samples` draws, each combined with every grid point
    samples = 4
    tau = {log_uniform = [0.001, 0.05]}     # also {uniform = [a, b]}, {choice = [...]}

    [pbt]            # optional: each program's members form one population (jaxrl/pbt.py; the docs: guide/sweeps.md)
    interval = 2000
    [pbt.explore]
    actor_lr = {perturb = [0.8, 1.25], bounds = [1e-5, 1e-2]}

Members (one config x one seed x one env) are grouped into programs: members that differ only in the agent's
numeric fields (learning rates, tau, gamma, entropy targets, TQC's d, ...) and seeds share one vmapped program
(``TrainState.hparams`` carries each member's values); an env, a loop field or a static agent field (widths,
batch size) starts another program.

Results are never relabelled:

* A member is identified by its id, 12 hex digits of the sha256 of everything that defines its result: the
  agent, env, seed and its fully resolved run, loop and agent configs (all but ``NON_DEFINING_RUN_FIELDS``: where
  outputs go, checkpoint cadence, compilation cache, sharding, ...). Its position in the file plays no part.
* ``OUT/members/<id>/`` holds a finished member: ``config.json`` (agent, env, seed, swept values, resolved
  configs, its program's directory and its position there), ``metrics.csv`` (its own columns of the program's
  metrics) and ``summary.json`` (timings; written last). A rerun of any sweep file into the same ``OUT`` reuses
  such members as they are; only the others are grouped into programs and run.
* A program's directory is ``OUT/groups/<env>-<hash of its member ids>`` (members in id order): rerunning the same
  file resumes an interrupted program from its checkpoint, another member set gets another directory, and a
  directory holding other settings is refused (``experiments.train.continue_or_start``).
* The driver writes ``OUT/plan.json`` (the file's members in order with their ids, which are reused, the programs
  to run, and every planned member's definition) before launching; each job gets the explicit member ids of its
  program and reads their definitions from ``plan.json``, so a job never re-plans (a job that starts after
  another one finished still runs exactly its members, and editing the sweep file meanwhile changes nothing).
* A PBT member's result depends on its whole population: its id hashes the ``[pbt]`` table and the ids of every
  member of its program too (``population_id``), and a population runs (and is reused) whole. ``OUT/pbt.csv``
  holds every population's lineage.
* ``OUT/results.csv`` has one row per member of the current file, in file order (``member`` is the position in
  the file, ``member_id`` the id); ``collect`` derives every column from that member's own ``config.json``,
  ``metrics.csv`` and ``summary.json``.
"""
from __future__ import annotations

import csv
import dataclasses
import hashlib
import itertools
import json
import math
import os
import random as random_lib
import sys
import tomllib
from typing import Any

from experiments import launch
from jaxrl import ConfigError

SECTIONS = ("run", "loop", "agent_config")
TOP_KEYS = {"agent", "config", "envs", "seeds", "sweep_seed", "description", "grid", "random", "pbt", *SECTIONS}
DISTRIBUTIONS = ("uniform", "log_uniform", "choice")
# RunConfig fields that do not change a member's result (where outputs go, how often checkpoints are written, the
# compilation cache, how members are spread over devices and hosts, videos and W&B logging; ``seeds``: a member is
# one seed). They are
# left out of member ids and cannot be swept.
NON_DEFINING_RUN_FIELDS = ("run_dir", "seeds", "overwrite", "checkpoint_every", "checkpoint_minutes",
                           "keep_checkpoints", "compilation_cache", "shard_members", "shard_envs", "distributed",
                           "video_every",
                           "video_width", "video_height", "wandb", "wandb_project", "wandb_entity", "wandb_group",
                           "wandb_tags")
# LoopConfig fields added after sweeps were saved, with the value that behaves as before them: a member's id counts
# such a field only away from that value, so earlier sweeps' finished members keep their ids.
LOOP_FIELDS_ADDED_LATER = {"env_shards": 1}
SWEEP_LOCK = "sweep.lock"  # held by the driver (jaxrl sweep) while it plans, runs and collects
PLAN_FILE = "plan.json"


@dataclasses.dataclass(frozen=True)
class Member:
    """One config x one seed x one env, with its configs fully resolved (``run.run_dir`` is None, ``run.seeds`` 1)."""

    index: int  # position in the sweep file
    env: str
    seed: int
    values: dict[str, Any]  # swept field ("actor_lr", "loop.num_envs") -> its value
    id: str  # member_id(...) of everything that defines its result
    run: Any = dataclasses.field(repr=False)
    loop: Any = dataclasses.field(repr=False)
    agent_cfg: Any = dataclasses.field(repr=False)
    # Population-based training: the sweep's canonical [pbt] table and the ids its member would have without PBT of
    # every member of its population (its program), sorted. Both are part of its id (``population_id``).
    pbt: dict[str, Any] | None = dataclasses.field(default=None, repr=False)
    population: tuple[str, ...] = dataclasses.field(default=(), repr=False)
    # A plug-in agent's code (jaxrl.provenance.plugin_code; None for a built-in): part of the id.
    agent_code: dict[str, Any] | None = dataclasses.field(default=None, repr=False)


@dataclasses.dataclass(frozen=True)
class Group:
    """One compiled program: its run/loop/template agent config and its members (in id order)."""

    index: int
    name: str  # <env>-<hash of the member ids>: also its directory under OUT/groups/
    run: Any
    loop: Any
    agent_cfg: Any
    members: tuple[Member, ...]
    pbt: Any = None  # jaxrl.pbt.PBTConfig of a population-based training program


@dataclasses.dataclass(frozen=True)
class Sweep:
    agent: Any
    agent_spec: str  # the agent as the file names it (a registered name or module:ATTRIBUTE)
    base: dict[str, dict[str, Any]]
    members: tuple[Member, ...]  # in file order; members with equal ids are the same run
    swept: tuple[str, ...]  # the "section.field" names that vary


def _hash_form(value):
    """JSON-able form for hashing: tuples as lists, ints as floats (1 and 1.0 configure the same run)."""
    if isinstance(value, dict):
        return {str(k): _hash_form(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_hash_form(v) for v in value]
    if isinstance(value, int) and not isinstance(value, bool):
        return float(value)
    return value


def _digest(data, length: int) -> str:
    text = json.dumps(_hash_form(data), sort_keys=True, separators=(",", ":"), allow_nan=True)
    return hashlib.sha256(text.encode()).hexdigest()[:length]


def member_id(agent: str, run: dict[str, Any], loop: dict[str, Any], agent_config: dict[str, Any],
              env_revision: int | None = None, agent_code: dict[str, Any] | None = None) -> str:
    """12 hex digits identifying a member's result: the agent (as named in the sweep file), its run config (env,
    seed, physics; not the ``NON_DEFINING_RUN_FIELDS``), its loop config and its agent config, all resolved; and the
    env's revision (``envs.env_revision``, today's unless given) where it is above 1, so a member that trained an
    env before it changed under the same name keeps its id and is never reused as the new env's. Agent fields
    added after sweeps were saved (``jaxrl.agent.added_field``) count only away from their default. A plug-in
    agent's code (``agent_code``: ``jaxrl.provenance.plugin_code``) counts by its hash, so an edited plug-in is a new
    member; built-in agents have none, and keep their ids across commits (the fingerprints track their numbers)."""
    import envs
    from agents import get_agent
    from jaxrl.agent import added_at_default

    run = {k: v for k, v in run.items() if k not in NON_DEFINING_RUN_FIELDS}
    loop = {k: v for k, v in loop.items() if LOOP_FIELDS_ADDED_LATER.get(k, object()) != v}
    later = added_at_default(get_agent(agent).Config, agent_config)
    agent_config = {k: v for k, v in agent_config.items() if k not in later}
    revision = envs.env_revision(run["env"]) if env_revision is None else env_revision
    return _digest({"agent": agent, "env": run["env"], "seed": run["seed"], "run": run, "loop": loop,
                    "agent_config": agent_config, **({"env_revision": revision} if revision > 1 else {}),
                    **({"agent_code": agent_code["sha256"]} if agent_code else {})}, 12)


def population_id(own_id: str, pbt: dict[str, Any], population) -> str:
    """A PBT member's id: its result depends on the [pbt] table and on every member of its population (whose
    weights it may copy), so all of them are hashed with what defines it alone (``own_id``, ``member_id``'s). An
    edited table or another population is another sweep, never a relabelled one."""
    return _digest({"member": own_id, "pbt": pbt, "population": sorted(population)}, 12)


def defined_id(d: dict[str, Any], env_revision: int | None = None) -> str:
    """The id of a member definition (``plan.json``'s, or a finished member's ``config.json``)."""
    own = member_id(d["agent"], d["run"], d["loop"], d["agent_config"], env_revision, d.get("agent_code"))
    if d.get("pbt") is None:
        return own
    if own not in d.get("population", ()):
        raise ConfigError(f"member {d.get('id', own)}: its population does not list it (edited or damaged)")
    return population_id(own, d["pbt"], d["population"])


def program_name(env: str, ids) -> str:
    return f"{env.replace('/', '-')}-{_digest(sorted(ids), 10)}"


def _key(name: str) -> tuple[str, str]:
    section, _, field = name.rpartition(".")
    section = section or "agent_config"
    if section not in SECTIONS:
        raise ConfigError(f"sweep key {name!r}: section {section!r} is not one of {', '.join(SECTIONS)}")
    return section, field


def _canonical(name: str) -> str:
    """Agent fields by their bare name (the common case), loop and run fields as section.field."""
    section, field = _key(name)
    return field if section == "agent_config" else f"{section}.{field}"


def _check_field(agent, name: str) -> None:
    from experiments.rundir import RunConfig
    from jaxrl.loop import LoopConfig

    section, field = _key(name)
    cls = {"run": RunConfig, "loop": LoopConfig, "agent_config": agent.Config}[section]
    fields = {f.name for f in dataclasses.fields(cls)}
    if field not in fields:
        raise ConfigError(f"sweep key {name!r}: {field!r} is not a field of {cls.__name__}; valid: "
                          f"{', '.join(sorted(fields))}")
    if section == "run" and field in ("env", "seed", "seeds", "run_dir"):
        raise ConfigError(f"sweep key {name!r}: set envs and seeds at the top of the sweep file, not in a grid")
    if section == "run" and field in NON_DEFINING_RUN_FIELDS:
        raise ConfigError(f"sweep key {name!r}: {field} does not change a member's result (members differing only "
                          "in it are the same run); set it in [run], not in a grid")


def _draw(rng: random_lib.Random, name: str, spec) -> Any:
    if not isinstance(spec, dict) or len(spec) != 1 or next(iter(spec)) not in DISTRIBUTIONS:
        raise ConfigError(f"[random] {name} = {spec!r}: expected one of {{uniform = [a, b]}}, "
                          "{log_uniform = [a, b]}, {choice = [...]}")
    kind, arg = next(iter(spec.items()))
    if kind == "choice":
        if not isinstance(arg, list) or not arg:
            raise ConfigError(f"[random] {name}: choice needs a non-empty list, got {arg!r}")
        return rng.choice(arg)
    if not (isinstance(arg, list) and len(arg) == 2 and all(isinstance(x, (int, float)) for x in arg)
            and arg[0] < arg[1]):
        raise ConfigError(f"[random] {name}: {kind} needs [low, high] with low < high, got {arg!r}")
    if kind == "log_uniform":
        if arg[0] <= 0:
            raise ConfigError(f"[random] {name}: log_uniform needs low > 0, got {arg[0]}")
        return math.exp(rng.uniform(math.log(arg[0]), math.log(arg[1])))
    return rng.uniform(*arg)


def load(path: str) -> Sweep:
    """Parse and validate a sweep file (one-line ConfigError for anything wrong), and list its members."""
    from agents import get_agent
    from experiments import configs
    from experiments.rundir import RunConfig
    from jaxrl import pbt as pbt_lib
    from jaxrl import provenance
    from jaxrl.loop import LoopConfig

    data = _read_toml(path)
    if "pbt" in data and not isinstance(data["pbt"], dict):
        raise ConfigError(f"sweep file {path}: pbt must be a [pbt] table, got {data['pbt']!r}")
    pbt = pbt_lib.parse(data["pbt"]) if "pbt" in data else None
    agent_name = data.get("agent")
    named = configs.load(data["config"]) if "config" in data else None
    if named is not None:
        agent_name = agent_name or named["agent"]

    def base_for(env: str | None):
        """The named config (with env's task tables) under this file's own tables."""
        source = named if named is None or env is None else configs.for_task(named, env)
        return {s: {**(source[s] if source else {}), **data.get(s, {})} for s in SECTIONS}

    base = base_for(None)
    agent_spec = "sac" if agent_name is None else agent_name  # agent = "" is refused (get_agent), not the default
    agent = get_agent(agent_spec)
    code = provenance.plugin_code(agent_spec)
    envs, seeds = _envs_and_seeds(data, base)
    grid, random_spec, samples = _swept_fields(data, agent)
    for cls, section in ((RunConfig, "run"), (LoopConfig, "loop"), (agent.Config, "agent_config")):
        configs.check_fields(cls, base[section], f"sweep file {path} [{section}]")
    rng = random_lib.Random(data.get("sweep_seed", 0))
    draws = [{name: _draw(rng, name, spec) for name, spec in random_spec.items()} for _ in range(samples)] or [{}]
    points = [dict(zip(grid, combo, strict=True), **draw) for combo in itertools.product(*grid.values())
              for draw in draws]
    members = [_member(agent, agent_spec, base_for(env), i, env, seed, point, code)
               for i, (env, point, seed) in enumerate(itertools.product(envs, points, seeds))]
    swept = tuple(sorted({name for point in points for name in point}))
    if pbt is not None:
        members = _populations(members, pbt, agent)
    return Sweep(agent=agent, agent_spec=agent_spec, base=base, members=tuple(members), swept=swept)


def _populations(members: list[Member], pbt, agent) -> list[Member]:
    """With a [pbt] table, each program's members form one population (checked: the fractions fit it, the chunk
    divides the interval, the explored fields are numeric and stay inside the values the agent accepts); each
    member's id then hashes the table and the whole
    population."""
    from jaxrl import pbt as pbt_lib
    from jaxrl.loop import traced_fields

    table = pbt_lib.as_table(pbt)
    populations: dict[Any, list[Member]] = {}
    for member in members:
        populations.setdefault(_program_key(member), []).append(member)
    ids = {}
    for population in populations.values():
        own = tuple(sorted({m.id for m in population}))
        first = population[0]
        try:
            pbt_lib.check(pbt, len(own), first.loop.eval_every, traced_fields(first.agent_cfg), agent.check_config,
                          [m.agent_cfg for m in population])
        except ConfigError as e:
            raise ConfigError(f"{e} (the population of {first.env}: members {sorted(m.index for m in population)})"
                              ) from None
        ids.update({m.id: own for m in population})
    return [dataclasses.replace(m, id=population_id(m.id, table, ids[m.id]), pbt=table, population=ids[m.id])
            for m in members]


def _read_toml(path: str) -> dict[str, Any]:
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise ConfigError(f"no sweep file {path!r}") from None
    except tomllib.TOMLDecodeError as e:
        raise ConfigError(f"sweep file {path} is not valid TOML: {e}") from None
    unknown = sorted(set(data) - TOP_KEYS)
    if unknown:
        raise ConfigError(f"sweep file {path}: unknown key(s) {', '.join(unknown)}; "
                          f"valid: {', '.join(sorted(TOP_KEYS))}")
    return data


def _envs_and_seeds(data: dict[str, Any], base: dict[str, dict]) -> tuple[list[str], list[int]]:
    """The sweep's envs and seeds (a count of seeds starts at the base run's seed)."""
    envs = data.get("envs", [base["run"].get("env", "dmc/CartpoleSwingup")])
    if isinstance(envs, str):
        envs = [envs]
    seeds = data.get("seeds", 1)
    if isinstance(seeds, int) and not isinstance(seeds, bool):
        if seeds <= 0:
            raise ConfigError(f"seeds = {seeds}: need a positive count or a list of seeds")
        seeds = list(range(base["run"].get("seed", 0), base["run"].get("seed", 0) + seeds))
    if not (isinstance(seeds, list) and seeds and all(isinstance(s, int) for s in seeds)):
        raise ConfigError(f"seeds = {seeds!r}: need a positive count or a non-empty list of integers")
    if not (isinstance(envs, list) and envs and all(isinstance(e, str) for e in envs)):
        raise ConfigError(f"envs = {envs!r}: need a list of env names")
    return envs, seeds


def _swept_fields(data: dict[str, Any], agent):
    """(grid, random specs, samples): the [grid] lists and the [random] table, checked. The members' points are the
    grid's product times ``samples`` draws of the random specs (seeded by sweep_seed)."""
    spellings: dict[str, str] = {}  # canonical name -> how the file first spelled it
    for table in ("grid", "random"):
        for name in data.get(table, {}):
            if table == "random" and name == "samples":
                continue
            canonical = _canonical(name)
            if canonical in spellings:
                raise ConfigError(f"sweep field {canonical!r} is named twice: {spellings[canonical]!r} and "
                                  f"[{table}] {name!r}; keep one of them")
            spellings[canonical] = f"[{table}] {name}"
    grid = {_canonical(name): values for name, values in data.get("grid", {}).items()}
    for name, values in grid.items():
        _check_field(agent, name)
        if not isinstance(values, list) or not values:
            raise ConfigError(f"[grid] {name} = {values!r}: need a non-empty list of values")
    random_spec = dict(data.get("random", {}))
    samples = random_spec.pop("samples", 1 if random_spec else 0)
    random_spec = {_canonical(name): spec for name, spec in random_spec.items()}
    if random_spec and (not isinstance(samples, int) or samples <= 0):
        raise ConfigError(f"[random] samples = {samples!r}: need a positive integer")
    for name in random_spec:
        _check_field(agent, name)
    return grid, random_spec, samples


def _member(agent, agent_spec: str, base, index: int, env: str, seed: int, values: dict[str, Any],
            agent_code: dict[str, Any] | None = None) -> Member:
    """A member with its configs resolved as ``train`` would (``learning_starts`` written as its number)."""
    from experiments import rundir
    from experiments.rundir import config_to_dict
    from experiments.train import validate
    from jaxrl.loop import written_down

    sections = {s: dict(base[s]) for s in SECTIONS}
    for name, value in values.items():
        section, field = _key(name)
        sections[section][field] = value
    # A sweep never overwrites: a program directory is only started, continued or reused.
    sections["run"].update(env=env, seed=seed, seeds=1, run_dir=None, overwrite=False)
    try:
        # The one precedence rule (agent defaults < named config < this file's tables and the member's values).
        resolved = rundir.resolve(agent_spec, tables=sections, where=f"sweep member {index}")
        run, loop, cfg = resolved.run, resolved.loop, resolved.agent_cfg
        validate(run, loop)
        agent.check_config(cfg)
    except (TypeError, ConfigError) as e:
        raise ConfigError(f"member {index} ({env}, seed {seed}, {values}): {e}") from None
    loop = written_down(loop)
    mid = member_id(agent_spec, config_to_dict(run), config_to_dict(loop), config_to_dict(cfg), agent_code=agent_code)
    return Member(index, env, seed, values, mid, run, loop, cfg, agent_code=agent_code)


def member_dir(out_dir: str, mid: str) -> str:
    return os.path.join(out_dir, "members", mid)


def finished(out_dir: str, member: Member) -> bool:
    """Whether ``OUT/members/<id>/`` holds this member's finished result (from a run of any sweep file)."""
    where = member_dir(out_dir, member.id)
    if not all(os.path.exists(os.path.join(where, name)) for name in ("config.json", "metrics.csv", "summary.json")):
        return False
    with open(os.path.join(where, "config.json")) as f:
        saved = json.load(f)
    if defined_id(saved, saved.get("env_revision", 1)) != member.id:
        raise ConfigError(f"{where} holds the result of other settings than its id says (edited or damaged); "
                          "move it away and rerun the sweep")
    return True


def plan(sweep: Sweep, out_dir: str, reuse: bool = True) -> list[Group]:
    """The programs to run: the members without a finished result in ``OUT/members/`` (all of them with
    ``reuse=False``), one program per env, run, loop and static agent fields. Members with equal ids run once."""
    todo = {}
    for member in sweep.members:
        if member.id not in todo and not (reuse and finished(out_dir, member)):
            todo[member.id] = member
    # A population runs whole: one unfinished member (its program was interrupted between members' files) reruns
    # the program, which finds it finished (continue_or_start) and writes every member again.
    unfinished = {m.population for m in todo.values() if m.pbt is not None}
    todo.update({m.id: m for m in sweep.members if m.pbt is not None and m.population in unfinished})
    groups: dict[Any, list[Member]] = {}
    for member in todo.values():
        groups.setdefault(_program_key(member), []).append(member)
    return [make_group(index, members, out_dir) for index, members in enumerate(groups.values())]


def _program_key(member: Member):
    from jaxrl.loop import program_fields

    return (member.env, repr(dataclasses.replace(member.run, seed=0)), repr(member.loop),
            repr(sorted(program_fields(member.agent_cfg).items())), json.dumps(member.pbt, sort_keys=True))


def make_group(index: int, members, out_dir: str) -> Group:
    """One program of ``members`` (which must share env, run, loop and static agent fields), in id order, in
    ``OUT/groups/<env>-<hash of the ids>``."""
    members = sorted(members, key=lambda m: m.id)
    if len({_program_key(m) for m in members}) != 1:
        raise ConfigError(f"members {', '.join(m.id for m in members)} cannot share one program (env, run, loop or "
                          "static agent fields differ)")
    first = members[0]
    if first.pbt is not None and len(members) != len(first.population):
        raise ConfigError(f"a population-based training program runs its whole population ({len(first.population)} "
                          f"members), got {len(members)}")
    name = program_name(first.env, [m.id for m in members])
    # On W&B, a sweep's programs are grouped under the sweep's name unless the sweep file names a group.
    run = dataclasses.replace(first.run, seeds=len(members), run_dir=os.path.join(out_dir, "groups", name),
                              wandb_group=first.run.wandb_group or os.path.basename(os.path.normpath(out_dir)))
    from jaxrl import pbt as pbt_lib

    return Group(index, name, run, first.loop, first.agent_cfg, tuple(members),
                 None if first.pbt is None else pbt_lib.parse(first.pbt))


def describe(sweep: Sweep, out_dir: str) -> str:
    """What ``--dry-run`` prints: the programs to run with their members, and the members reused."""
    groups = plan(sweep, out_dir)
    planned = {m.id for g in groups for m in g.members}
    reused = [m for m in sweep.members if m.id not in planned]
    lines = [f"{len(sweep.members)} member(s): {len(reused)} reused from {os.path.join(out_dir, 'members')}, "
             f"{len(planned)} to run in {len(groups)} program(s)"]
    for g in groups:
        population = ""
        if g.pbt is not None:
            bottom, top = g.pbt.counts(len(g.members))
            population = (f", one population (PBT every {g.pbt.interval} env steps: the worst {bottom} copy the best "
                          f"{top}, exploring {', '.join(e.field for e in g.pbt.explore)})")
        lines.append(f"{os.path.join(out_dir, 'groups', g.name)}: {len(g.members)} member(s) in one program"
                     + population)
        lines += [f"  member {m.index} id {m.id} seed {m.seed} {m.values}" for m in g.members]
    if reused:
        lines.append("reused (finished in OUT/members/<id>):")
        lines += [f"  member {m.index} id {m.id} seed {m.seed} {m.values}" for m in reused]
    dupes = len(sweep.members) - len({m.id for m in sweep.members})
    if dupes:
        lines.append(f"{dupes} member(s) repeat an earlier member of the file exactly: they share its result")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------- plan.json, jobs


def _definition(sweep_agent: str, member: Member) -> dict[str, Any]:
    import envs
    from experiments.rundir import config_to_dict

    return {"agent": sweep_agent, "env": member.env, "env_revision": envs.env_revision(member.env),
            "seed": member.seed, "values": member.values,
            "run": config_to_dict(member.run), "loop": config_to_dict(member.loop),
            "agent_config": config_to_dict(member.agent_cfg),
            **({} if member.pbt is None else {"pbt": member.pbt, "population": list(member.population)}),
            **({} if member.agent_code is None else {"agent_code": member.agent_code})}


def read_plan(out_dir: str) -> dict[str, Any]:
    path = os.path.join(out_dir, PLAN_FILE)
    try:
        with open(path) as f:
            return json.load(f)
    except FileNotFoundError:
        raise ConfigError(f"no {path}: run the sweep with jaxrl sweep FILE --out {out_dir} first") from None
    except ValueError as e:
        raise ConfigError(f"{path} is unreadable ({e})") from None


def write_plan(sweep_file: str, sweep: Sweep, groups: list[Group], out_dir: str) -> dict[str, Any]:
    """``OUT/plan.json``: the file's members in order (id, reused or not), the programs to run (member ids), and the
    definition of every member ever planned into ``OUT`` (merged: ids are hashes, so entries never conflict; a job
    queued by an earlier driver still finds its members)."""
    from jaxrl.files import write_json

    path = os.path.join(out_dir, PLAN_FILE)
    definitions = {}
    if os.path.exists(path):
        try:
            definitions = dict(read_plan(out_dir).get("definitions", {}))
        except ConfigError:
            definitions = {}
    definitions.update({m.id: _definition(sweep.agent_spec, m) for m in sweep.members})
    planned = {m.id for g in groups for m in g.members}
    data = {"sweep_file": os.path.abspath(sweep_file), "agent": sweep.agent_spec, "swept": list(sweep.swept),
            "members": [{"member": m.index, "id": m.id, "env": m.env, "seed": m.seed, "values": m.values,
                         "reused": m.id not in planned} for m in sweep.members],
            "programs": [{"name": g.name, "env": g.run.env, "members": [m.id for m in g.members]} for g in groups],
            "definitions": definitions}
    os.makedirs(out_dir, exist_ok=True)
    write_json(path, data)
    return data


def _member_from_definition(agent, mid: str, d: dict[str, Any]) -> Member:
    from experiments.rundir import RunConfig, config_from_dict
    from jaxrl.loop import LoopConfig

    member = Member(-1, d["env"], d["seed"], d["values"], mid, config_from_dict(RunConfig, d["run"]),
                    config_from_dict(LoopConfig, d["loop"]), config_from_dict(agent.Config, d["agent_config"]),
                    d.get("pbt"), tuple(d.get("population", ())), d.get("agent_code"))
    import envs

    if d.get("env_revision", 1) != envs.env_revision(d["env"]):
        raise ConfigError(f"plan.json: member {mid} was planned for {d['env']} before that env changed "
                          "(docs/dmc_audit.md); run jaxrl sweep again to plan it anew")
    if defined_id(d) != mid:
        raise ConfigError(f"plan.json: the definition of member {mid} does not hash to its id (edited?)")
    return member


def run_program(out_dir: str, member_ids: list[str], quiet: bool = True) -> list[str]:
    """Train the program of exactly these members (their definitions from ``OUT/plan.json``; nothing is
    re-planned) in ``OUT/groups/<env>-<hash>``: start it, resume it from its checkpoint, or reuse it if it
    finished (``continue_or_start``); then write each member's ``OUT/members/<id>/``. The unit of work a launcher
    ships to a worker; returns the member ids."""
    from agents import get_agent
    from experiments.train import continue_or_start

    saved = read_plan(out_dir)
    member_ids = list(dict.fromkeys(member_ids))
    missing = [mid for mid in member_ids if mid not in saved.get("definitions", {})]
    if missing:
        raise ConfigError(f"{os.path.join(out_dir, PLAN_FILE)} does not define member(s) {', '.join(missing)}")
    from jaxrl import provenance

    spec = saved["definitions"][member_ids[0]]["agent"]
    agent = get_agent(spec)
    members = [_member_from_definition(agent, mid, saved["definitions"][mid]) for mid in member_ids]
    # A job that starts after the plug-in was edited would train other code under the planned ids.
    code = provenance.plugin_code(spec)
    planned = members[0].agent_code
    if (code or {}).get("sha256") != (planned or {}).get("sha256"):
        raise ConfigError(f"agent {spec}: its code changed since the sweep was planned ({provenance.code_text(planned)}"
                          f" -> {provenance.code_text(code)}); run jaxrl sweep again to plan the edited code as new "
                          "members")
    group = make_group(0, members, out_dir)
    summary, _ = continue_or_start(agent, group.run, group.loop, group.agent_cfg,
                                   members=[(m.seed, m.agent_cfg) for m in group.members], quiet=quiet,
                                   pbt=group.pbt)
    _write_members(saved["definitions"], group, summary, out_dir)
    return [m.id for m in group.members]


def _write_members(definitions, group: Group, summary: dict, out_dir: str) -> None:
    """Split the program's per-member metric columns into each member's own ``metrics.csv``, and write its
    ``config.json``; ``summary.json`` last (it marks the member finished)."""
    from experiments import rundir
    from jaxrl import pbt as pbt_lib
    from jaxrl.files import csv_text, write_json, write_text_atomic
    from jaxrl.logging import member_row, read_rows

    history = read_rows(os.path.join(group.run.run_dir, "metrics.jsonl"))
    program = rundir.load_saved(group.run.run_dir)
    stack = {key: program[key] for key in ("environment", "resumed_under") if key in program}  # jaxrl.provenance
    if group.pbt is not None:
        initial = [{e.field: getattr(m.agent_cfg, e.field) for e in group.pbt.explore} for m in group.members]
    for k, member in enumerate(group.members):
        own = [member_row(r, k) for r in history]
        where = member_dir(out_dir, member.id)
        os.makedirs(where, exist_ok=True)
        config = {**definitions[member.id], "id": member.id, "group": group.name,
                  "group_dir": os.path.join("groups", group.name), "member_in_group": k,
                  "group_members": len(group.members), **stack}
        if group.pbt is not None:  # the explored values the networks ending in this member trained with
            config["pbt_schedule"] = pbt_lib.schedule(history, k, group.pbt, initial, summary["env_steps"])
        write_json(os.path.join(where, "config.json"), config)
        write_text_atomic(os.path.join(where, "metrics.csv"), csv_text(own))
        evals = _evals(own)
        write_json(os.path.join(where, "summary.json"), {
            "id": member.id, "env_steps": own[-1]["env_steps"] if own else 0,
            "final_eval_return": evals[-1] if evals else float("nan"),
            "best_eval_return": max(evals) if evals else float("nan"),
            **{name: summary.get(name) for name in ("compile_s", "run_s", "checkpoint_s", "wall_s", "resumed_from")}})


def _evals(rows) -> list[float]:
    values = [r.get("eval/return") for r in rows]
    return [float(v) for v in values if v not in (None, "")]


# ------------------------------------------------------------------------------------------- results


def _swept_value(config: dict[str, Any], name: str):
    section, field = _key(name)
    return config[section][field]


def result_row(out_dir: str, index: int, mid: str, swept) -> dict[str, Any]:
    """One row of results.csv, from ``OUT/members/<id>/`` alone: config.json (group, position, env, seed, the
    swept fields' resolved values), metrics.csv (eval returns, env steps) and summary.json (timings)."""
    where = member_dir(out_dir, mid)
    with open(os.path.join(where, "config.json")) as f:
        config = json.load(f)
    with open(os.path.join(where, "metrics.csv"), newline="") as f:
        metrics = list(csv.DictReader(f))
    with open(os.path.join(where, "summary.json")) as f:
        summary = json.load(f)
    evals = _evals(metrics)
    return {"member": index, "member_id": mid, "group": config["group"], "member_in_group": config["member_in_group"],
            "env": config["env"], "seed": config["seed"], **{name: _swept_value(config, name) for name in swept},
            "final_eval_return": evals[-1] if evals else float("nan"),
            "best_eval_return": max(evals) if evals else float("nan"),
            "env_steps": int(metrics[-1]["env_steps"]) if metrics else 0, "compile_s": summary["compile_s"],
            "run_s": summary["run_s"], "group_members": config["group_members"],
            # A PBT member's explored values at the end (its initial ones are the swept columns).
            **{f"final_{name.partition('/')[2]}": float(value) for name, value in (metrics[-1] if metrics else {})
               .items() if config.get("pbt") is not None and name.startswith("hparams/")},
            # What produced the row (jaxrl.provenance): the commit, "+uncommitted" where the tree had edits.
            "commit": row_commit(config.get("environment"))}


def row_commit(environment: dict[str, Any] | None) -> str:
    """A results.csv row's ``commit``: 12 hex digits, "+uncommitted" for an edited tree, "none" outside git."""
    git = (environment or {}).get("git") or {}
    if not git.get("commit"):
        return "" if environment is None else "none"
    return git["commit"][:12] + ("+uncommitted" if git.get("uncommitted") else "")


def collect(out_dir: str) -> list[dict[str, Any]]:
    """``OUT/results.csv``: one row per member of the sweep file ``OUT/plan.json`` was last written for, in file
    order, each derived from its own ``OUT/members/<id>/`` (whatever launcher or earlier sweep produced it).
    Members without a finished result are left out, with a note."""
    saved = read_plan(out_dir)
    rows, missing = [], []
    for entry in saved["members"]:
        if os.path.exists(os.path.join(member_dir(out_dir, entry["id"]), "summary.json")):
            rows.append(result_row(out_dir, entry["member"], entry["id"], saved["swept"]))
        else:
            missing.append(entry["member"])
    if missing:
        print(f"jaxrl: {len(missing)} member(s) have no result yet (members {missing}); results.csv leaves them out",
              file=sys.stderr, flush=True)
    if rows:
        from jaxrl.files import csv_text, write_text_atomic

        write_text_atomic(os.path.join(out_dir, "results.csv"), csv_text(rows))
        lineage = _lineage(out_dir, rows)
        if lineage:
            write_text_atomic(os.path.join(out_dir, "pbt.csv"), csv_text(lineage))
    return rows


def _lineage(out_dir: str, rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """``OUT/pbt.csv``: every PBT program's ``pbt.csv`` (its members by position in the program) with the members
    and parents named by their ids and positions in the sweep file."""
    by_slot = {(r["group"], r["member_in_group"]): r for r in rows}
    out = []
    for group in dict.fromkeys(r["group"] for r in rows):
        path = os.path.join(out_dir, "groups", group, "pbt.csv")
        if not os.path.exists(path):
            continue
        with open(path, newline="") as f:
            for entry in csv.DictReader(f):
                own, parent = by_slot.get((group, int(entry["member"]))), by_slot.get((group, int(entry["parent"])))
                if own is None or parent is None:
                    continue
                fields = {k: v for k, v in entry.items() if k not in ("env_steps", "member", "parent", "fitness",
                                                                      "copied")}
                out.append({"group": group, "env_steps": int(entry["env_steps"]), "member": own["member"],
                            "member_id": own["member_id"], "fitness": float(entry["fitness"]),
                            "parent": parent["member"], "parent_id": parent["member_id"],
                            "copied": entry["copied"] == "True", **{k: float(v) for k, v in fields.items()}})
    return out


def check_out(out_dir: str) -> None:
    """A sweep's ``--out`` is a directory of its own: never a run directory (nor one holding a run's files)."""
    from experiments import rundir

    rundir.check_path(out_dir, "--out")
    rundir.check_location(out_dir, "--out")
    if rundir.run_files(out_dir):
        raise ConfigError(f"--out {out_dir} holds a training run ({', '.join(rundir.run_files(out_dir))}), not a "
                          "sweep's outputs; a sweep never writes into a run directory: choose another --out")


def run_sweep(sweep_file: str, out_dir: str, launcher: str = "local", launcher_options: dict | None = None,
              quiet: bool = False) -> list[dict[str, Any]]:
    """Plan (reusing finished members), write ``OUT/plan.json``, run the programs with ``launcher``, and write
    ``OUT/results.csv``; returns its rows."""
    from experiments import rundir

    check_out(out_dir)
    sweep = load(sweep_file)
    # One driver per --out: another sweep file planned into it meanwhile would replace plan.json under this one.
    with rundir.RunLock(out_dir, SWEEP_LOCK, "sweep output directory", "choose another --out"):
        groups = plan(sweep, out_dir)
        write_plan(sweep_file, sweep, groups, out_dir)
        if not quiet:
            reused = len({m.id for m in sweep.members}) - sum(len(g.members) for g in groups)
            print(f"{len(sweep.members)} member(s), {reused} reused; {len(groups)} program(s) to run"
                  + "".join(f"\n  {g.name} x{len(g.members)}" for g in groups), flush=True)
        launch.launch(run_program, launcher, os.path.abspath(out_dir), [[m.id for m in g.members] for g in groups],
                      launcher_options or {}, quiet)
        return collect(out_dir)
