"""Sweeps: ``jaxrl sweep FILE.toml [--out DIR] [--launcher local|slurm|ray]``.

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

Members (one config x one seed x one env) are grouped into programs: members that differ only in the agent's
numeric fields (learning rates, tau, gamma, entropy targets, TQC's d, ...) and seeds share one vmapped program
(``TrainState.hparams`` carries each member's values); an env, a loop field or a static agent field (widths,
batch size) starts another program. Each program is an ordinary run directory under ``OUT/groups/`` (resumable
with ``jaxrl train --resume``); ``OUT/results.csv`` has one row per member, ``OUT/members/mNNN/`` its own metrics.
"""
from __future__ import annotations

import csv
import dataclasses
import itertools
import json
import math
import os
import random as random_lib
import tomllib
from typing import Any

from jaxrl import ConfigError

SECTIONS = ("run", "loop", "agent_config")
TOP_KEYS = {"agent", "config", "envs", "seeds", "sweep_seed", "description", "grid", "random", *SECTIONS}
DISTRIBUTIONS = ("uniform", "log_uniform", "choice")


@dataclasses.dataclass(frozen=True)
class Member:
    index: int
    env: str
    seed: int
    values: dict[str, Any]  # swept field ("actor_lr", "loop.num_envs") -> its value


@dataclasses.dataclass(frozen=True)
class Group:
    """One compiled program: its run/loop/template agent config and its members."""

    index: int
    name: str
    run: Any
    loop: Any
    agent_cfg: Any
    members: tuple[Member, ...]
    member_cfgs: tuple[Any, ...]


@dataclasses.dataclass(frozen=True)
class Sweep:
    agent: Any
    base: dict[str, dict[str, Any]]
    members: tuple[Member, ...]
    swept: tuple[str, ...]  # the "section.field" names that vary


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
    from experiments.train import RunConfig
    from jaxrl.loop import LoopConfig

    section, field = _key(name)
    cls = {"run": RunConfig, "loop": LoopConfig, "agent_config": agent.Config}[section]
    fields = {f.name for f in dataclasses.fields(cls)}
    if field not in fields:
        raise ConfigError(f"sweep key {name!r}: {field!r} is not a field of {cls.__name__}; valid: "
                          f"{', '.join(sorted(fields))}")
    if section == "run" and field in ("env", "seed", "seeds", "run_dir"):
        raise ConfigError(f"sweep key {name!r}: set envs and seeds at the top of the sweep file, not in a grid")


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
    base = {s: {} for s in SECTIONS}
    agent_name = data.get("agent")
    if "config" in data:
        named = configs.load(data["config"])
        agent_name = agent_name or named["agent"]
        base = {s: dict(named[s]) for s in SECTIONS}
    for section in SECTIONS:
        base[section].update(data.get(section, {}))
    agent = get_agent(agent_name or "sac")

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
    from experiments.train import RunConfig
    from jaxrl.loop import LoopConfig

    for cls, section in ((RunConfig, "run"), (LoopConfig, "loop"), (agent.Config, "agent_config")):
        configs.check_fields(cls, base[section], f"sweep file {path} [{section}]")

    rng = random_lib.Random(data.get("sweep_seed", 0))
    draws = [{name: _draw(rng, name, spec) for name, spec in random_spec.items()} for _ in range(samples)] or [{}]
    points = [dict(zip(grid, combo), **draw) for combo in itertools.product(*grid.values()) for draw in draws]
    members = [Member(i, env, seed, point) for i, (env, point, seed) in
               enumerate(itertools.product(envs, points, seeds))]
    swept = tuple(sorted({name for point in points for name in point}))
    return Sweep(agent=agent, base=base, members=tuple(members), swept=swept)


def plan(sweep: Sweep, out_dir: str) -> list[Group]:
    """Group members into programs: same env, run, loop and static agent fields -> one vmapped program."""
    from experiments.train import RunConfig, config_from_dict
    from jaxrl.loop import default_loop_config, program_fields

    agent = sweep.agent
    groups: dict[Any, list] = {}
    for member in sweep.members:
        sections = {s: dict(sweep.base[s]) for s in SECTIONS}
        for name, value in member.values.items():
            section, field = _key(name)
            sections[section][field] = value
        run = config_from_dict(RunConfig, {**sections["run"], "env": member.env, "seed": member.seed})
        loop = dataclasses.replace(default_loop_config(agent), **sections["loop"])
        try:
            cfg = config_from_dict(agent.Config, sections["agent_config"])
        except TypeError as e:
            raise ConfigError(f"member {member.index}: {e}") from None
        agent.check_config(cfg)
        key = (member.env, repr(dataclasses.replace(run, seed=0)), repr(loop),
               repr(sorted(program_fields(cfg).items())))
        groups.setdefault(key, []).append((member, run, loop, cfg))
    out = []
    for index, entries in enumerate(groups.values()):
        member, run, loop, cfg = entries[0]
        name = f"g{index:03d}-{member.env.replace('/', '-')}"
        run = dataclasses.replace(run, run_dir=os.path.join(out_dir, "groups", name))
        out.append(Group(index, name, run, loop, cfg, tuple(e[0] for e in entries), tuple(e[3] for e in entries)))
    return out


def run_group(sweep_file: str, out_dir: str, index: int, quiet: bool = True) -> list[dict[str, Any]]:
    """Train one program of the sweep (resuming it if it has checkpoints; skipping it if it finished) and write
    its members' metrics; returns their result rows. The unit of work a launcher ships to a worker."""
    from experiments.train import has_checkpoint, train

    sweep = load(sweep_file)
    group = plan(sweep, out_dir)[index]
    summary_path = os.path.join(group.run.run_dir, "summary.json")
    if os.path.exists(summary_path):
        with open(summary_path) as f:
            summary = json.load(f)
    else:
        resume = has_checkpoint(group.run.run_dir)
        members = [(m.seed, cfg) for m, cfg in zip(group.members, group.member_cfgs)]
        summary, _ = train(sweep.agent, group.run, group.loop, group.agent_cfg, resume=resume, quiet=quiet,
                           members=members)
    return _member_outputs(sweep, group, summary, out_dir)


def _member_outputs(sweep: Sweep, group: Group, summary: dict, out_dir: str) -> list[dict[str, Any]]:
    """Split the program's per-member metric columns into one metrics.csv per member; one result row each."""
    with open(os.path.join(group.run.run_dir, "metrics.jsonl")) as f:
        history = [json.loads(line) for line in f]
    rows = []
    for k, member in enumerate(group.members):
        suffix = f"/member{k}"
        own = [{"env_steps": r["env_steps"], "updates": r["updates"],
                **{name[: -len(suffix)]: v for name, v in r.items() if name.endswith(suffix)}} for r in history]
        if len(group.members) == 1:  # a one-member program logs no per-member columns
            own = [{n: v for n, v in r.items() if "/member" not in n} for r in history]
        member_dir = os.path.join(out_dir, "members", f"m{member.index:03d}")
        os.makedirs(member_dir, exist_ok=True)
        _write_csv(os.path.join(member_dir, "metrics.csv"), own)
        evals = [r["eval/return"] for r in own if r.get("eval/return") is not None]
        row = {"member": member.index, "group": group.name, "member_in_group": k, "env": member.env,
               "seed": member.seed, **{name: member.values.get(name) for name in sweep.swept},
               "final_eval_return": evals[-1] if evals else float("nan"),
               "best_eval_return": max(evals) if evals else float("nan"),
               "env_steps": summary["env_steps"], "compile_s": summary["compile_s"],
               "run_s": summary.get("run_s", float("nan")), "group_members": len(group.members)}
        with open(os.path.join(member_dir, "summary.json"), "w") as f:
            json.dump(row, f, indent=2)
        rows.append(row)
    return rows


def _write_csv(path: str, rows: list[dict[str, Any]]) -> None:
    columns = list(dict.fromkeys(k for r in rows for k in r))
    with open(path, "w", newline="") as f:
        writer = csv.DictWriter(f, fieldnames=columns)
        writer.writeheader()
        writer.writerows(rows)


def collect(out_dir: str) -> list[dict[str, Any]]:
    """results.csv from every finished member's summary (whatever launcher ran it), sorted by member."""
    members_dir = os.path.join(out_dir, "members")
    rows = []
    for name in sorted(os.listdir(members_dir)) if os.path.isdir(members_dir) else []:
        path = os.path.join(members_dir, name, "summary.json")
        if os.path.exists(path):
            with open(path) as f:
                rows.append(json.load(f))
    rows.sort(key=lambda r: r["member"])
    if rows:
        _write_csv(os.path.join(out_dir, "results.csv"), rows)
    return rows


def run_sweep(sweep_file: str, out_dir: str, launcher: str = "local", launcher_options: dict | None = None,
              quiet: bool = False) -> list[dict[str, Any]]:
    """Run every program of the sweep with ``launcher`` and write ``out_dir/results.csv``."""
    from experiments import launch

    sweep = load(sweep_file)
    groups = plan(sweep, out_dir)
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "plan.json"), "w") as f:
        json.dump({"sweep_file": os.path.abspath(sweep_file), "agent": sweep.agent.name, "swept": sweep.swept,
                   "groups": [{"name": g.name, "env": g.run.env, "members": [m.index for m in g.members]}
                              for g in groups]}, f, indent=2)
    if not quiet:
        print(f"{len(sweep.members)} member(s) in {len(groups)} program(s): "
              + ", ".join(f"{g.name} x{len(g.members)}" for g in groups), flush=True)
    launch.launch(launcher, os.path.abspath(sweep_file), os.path.abspath(out_dir), [g.index for g in groups],
                  launcher_options or {}, quiet)
    return collect(out_dir)
