"""``jaxrl reproduce CONFIG [--tasks ...] [--steps N] [--seeds K]``: run a paper protocol, report against the paper.

For each task, one vmapped program trains every seed of the named config (``experiments/configs/*.toml``, its
``[reproduce]`` table: targets algorithm, tasks, seeds, max_return). Then ``report.md`` is written beside the
runs, readable without running anything:

* per task, at every env step where the published table has a point we also evaluated: our mean +- std over
  seeds next to the published mean +- std, and the difference in units of the published std;
* aggregates over tasks the way papers report them: mean and IQM of max-normalised scores with stratified
  bootstrap 95 % confidence intervals (``rliable``), at the last env step every task has;
* learning curves (every seed, the mean) with the published points overlaid, one PNG per task;
* ``report.json``: the same rows (each seed's return too), the command and date, and each run's environment block:
  the results file a figure cites (``python bench/reproduce_table.py report.json`` prints the docs' table).

A report states only what ran: it covers every run under ``OUT/runs`` that has evaluated (whichever ``--tasks``
trained it, and says which tasks it covers), and its command (one per set of settings), the settings that differ
from the protocol's description and the action repeat are read from each run's config.json, never from the command
that writes the report (``--report-only``). Every task's configs and run directory are checked before anything is
printed or written: a refused command writes nothing.

Finished tasks are skipped and interrupted ones resume from their checkpoints when the command is rerun.
"""
from __future__ import annotations

import csv
import dataclasses
import datetime
import json
import math
import os
from typing import Any

import numpy as np

from experiments import rundir
from jaxrl import ConfigError
from jaxrl.files import write_json, write_text_atomic
from jaxrl.logging import member_values

# Every CSV in this directory (DMC: dmc_published.csv; Playground's robots: playground_published.csv).
TARGETS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "targets")
# dm_control task names whose MuJoCo Playground name is not the CamelCase of the dm_control one.
DMC_RENAMES = {"cup-catch": "BallInCup", "swimmer-swimmer6": "SwimmerSwimmer6", "point_mass-easy": "PointMass"}


def dmc_task_name(env_name: str) -> str | None:
    """``dmc/CheetahRun`` -> ``cheetah-run`` (the targets table's names); None for non-DMC envs."""
    suite, _, task = env_name.partition("/")
    if suite != "dmc":
        return None
    for dm_name, playground in DMC_RENAMES.items():
        if playground == task:
            return dm_name
    words, word = [], ""
    for ch in task:
        if ch.isupper() and word:
            words.append(word)
            word = ""
        word += ch
    return "-".join(w.lower() for w in words + [word])


def load_targets(path: str, algorithm: str) -> dict[str, list[dict[str, Any]]]:
    """{task: [{env_steps, mean, std, seeds}, ...]} of ``algorithm`` in a targets CSV, or in every CSV of a
    directory. A std of nan and 0 seeds mean the source does not state them."""
    if not os.path.exists(path):
        raise ConfigError(f"no targets table {path!r}")
    files = [os.path.join(path, n) for n in sorted(os.listdir(path)) if n.endswith(".csv")] \
        if os.path.isdir(path) else [path]
    out: dict[str, list[dict[str, Any]]] = {}
    for file in files:
        with open(file) as f:
            for row in csv.DictReader(f):
                if row["algorithm"] == algorithm:
                    out.setdefault(row["task"], []).append({
                        "env_steps": int(row["env_steps"]), "mean": float(row["mean_return"]),
                        "std": float(row["std_over_seeds"]), "seeds": int(row["seeds"])})
    return out


@dataclasses.dataclass
class Plan:
    agent: Any
    config_name: str
    description: str
    algorithm: str
    tasks: list[str]
    seeds: int
    max_return: float | None
    run: Any
    loop: Any
    agent_cfg: Any
    tables: dict[str, dict[str, Any]]  # the --steps / --override values, resolved again per task (task tables)
    unverified: str = ""  # the config's settings no source confirms as the published baseline's
    agent_name: str | None = None  # --agent: a plug-in trained under the protocol in place of its agent
    overrides: tuple[str, ...] = ()  # the --override arguments as given (a report states the runs' own: what_ran)

    def configs_for(self, task: str):
        """(run, loop, agent config) of one task: the config file's task tables apply under the overrides."""
        from experiments import rundir

        resolved = rundir.resolve(self.agent_name, config=self.config_name, tables=self.tables, env=task)
        run = dataclasses.replace(resolved.run, env=task, seeds=self.seeds)
        return run, resolved.loop, resolved.agent_cfg


def make_plan(config: str, tasks: list[str] | None, steps: int | None, seeds: int | None,
              overrides: list[str], agent: str | None = None) -> Plan:
    """What ``jaxrl reproduce`` runs; ``agent`` (``--agent``, e.g. a plug-in ``module:ATTR``) trains under the
    config's protocol in place of its agent, and is reported beside the published numbers of the config's."""
    from experiments import configs, rundir

    saved = configs.load(config)
    spec = saved["reproduce"]
    if not spec:
        raise ConfigError(f"config {config!r} has no [reproduce] table (algorithm, tasks, seeds); configs with one: "
                          + ", ".join(n for n in configs.list_configs() if configs.load(n)["reproduce"]))
    tables = {s: {} for s in rundir.SECTIONS}
    for item in overrides:
        name, sep, value = item.partition("=")
        section, _, field = name.rpartition(".")
        if not sep or section not in tables:
            raise ConfigError(f"--override {item!r}: expected run.FIELD=VALUE, loop.FIELD=VALUE or "
                              "agent_config.FIELD=VALUE")
        tables[section][field] = _parse_value(value)
    if steps is not None:
        tables["loop"]["steps"] = steps
    resolved = rundir.resolve(agent, config=config, tables=tables)
    agent_name = agent
    agent, run, loop, agent_cfg = resolved.agent, resolved.run, resolved.loop, resolved.agent_cfg
    seeds = spec.get("seeds", 1) if seeds is None else seeds
    if seeds <= 0:
        raise ConfigError(f"--seeds must be a positive integer, got {seeds}")
    import envs

    tasks = list(tasks or spec.get("tasks") or [run.env])
    valid = set(envs.list_envs())
    for task in tasks:
        if task not in valid:
            raise ConfigError(f"unknown task {task!r}; valid: names from `jaxrl envs`, e.g. dmc/CheetahRun")
    from experiments.train import validate

    # Every task's own values (its task table under the overrides) must be valid before anything is printed or
    # written and the first task trains: a refused command writes nothing (one-line errors). The same checks as
    # training's first ones (train._prepare: validate, then the agent's check_config).
    for task in tasks:
        task_config = rundir.resolve(agent_name, config=config, tables=tables, env=task)
        validate(dataclasses.replace(task_config.run, env=task, seeds=seeds), task_config.loop)
        task_config.agent.check_config(task_config.agent_cfg)
    return Plan(agent, config, saved.get("description", ""), spec.get("algorithm", agent.name), tasks, seeds,
                spec.get("max_return"), run, loop, agent_cfg, tables, spec.get("unverified", ""), agent_name,
                tuple(overrides))


def _parse_value(text: str):
    import tomllib

    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def task_dir(out_dir: str, task: str) -> str:
    return os.path.join(out_dir, "runs", task.replace("/", "-"))


def check_run_dirs(plan: Plan, out_dir: str) -> None:
    """Refuse, before the first task trains, a task whose run directory holds a run of other settings: the refusal
    ``train.continue_or_start`` gives when that task's turn comes (the same comparison), said before anything is
    written instead of after the tasks before it trained."""
    from jaxrl.loop import written_down

    for task in plan.tasks:
        run_dir = task_dir(out_dir, task)
        if not rundir.run_files(run_dir):
            continue
        base = rundir.resolve(saved=rundir.load_saved(run_dir), run_dir=run_dir)
        run, loop, agent_cfg = plan.configs_for(task)
        if type(base.agent_cfg) is not type(agent_cfg):
            raise ConfigError(f"{run_dir} holds a run of agent {base.agent.name!r}, not {plan.agent.name!r}; results "
                              "are never relabelled: choose another output directory")
        changes = rundir.differences(base, run, written_down(loop), agent_cfg)
        defining = [f"run.{f}" for f in rundir.RUN_FIXED]
        different = {name: change for name, change in changes.items()
                     if name in defining or name.split(".")[0] in ("loop", "agent_config") and name != "loop.steps"}
        if base.pbt is not None:
            different["pbt"] = (base.pbt, None)
        if different:
            name, (old, new) = next(iter(different.items()))
            raise ConfigError(f"{run_dir} holds a run with other settings ({name}: {old!r} there, {new!r} now); "
                              "results are never relabelled: choose another output directory")


def run_tasks(plan: Plan, out_dir: str, quiet: bool = False, checked: bool = False) -> None:
    """Train (or continue, or reuse) each task's run; ``checked``: ``check_run_dirs`` already passed."""
    from experiments.train import continue_or_start

    if not checked:
        check_run_dirs(plan, out_dir)
    for task in plan.tasks:
        run_dir = task_dir(out_dir, task)
        run, loop, agent_cfg = plan.configs_for(task)
        run = dataclasses.replace(run, run_dir=run_dir)
        if not quiet:
            print(f"{task}: {plan.seeds} seed(s) x {loop.steps} env steps -> {run_dir}", flush=True)
        # A finished run of the same protocol is reused, an interrupted one continued, one of other settings refused.
        continue_or_start(plan.agent, run, loop, agent_cfg, quiet=quiet)


def curves(run_dir: str) -> tuple[np.ndarray, np.ndarray]:
    """(env steps [T], eval returns [T, seeds]) of a run's metrics."""
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        rows = [json.loads(line) for line in f]
    rows = [r for r in rows if r.get("eval/return") is not None and math.isfinite(r["eval/return"])]
    values = [member_values(r, "eval/return") for r in rows]
    return np.array([r["env_steps"] for r in rows]), np.array(values, np.float64).reshape(len(rows), -1)


def not_comparable(task: str, targets: dict[str, list[dict[str, Any]]], algorithm: str) -> str | None:
    """Why our runs on ``task`` cannot be set beside the published ``algorithm`` results in ``targets``: the env is
    known to differ from the benchmark's (``envs.not_comparable``: docs/dmc_audit.md), or nothing is published for
    it. None where they can."""
    import envs

    reason = envs.not_comparable(task)
    if reason is not None:
        return f"the env differs from the benchmark's: {reason}"
    if not targets.get(dmc_task_name(task) or task):
        return f"no published {algorithm} result for {dmc_task_name(task) or task}"
    return None


@dataclasses.dataclass(frozen=True)
class Ran:
    """One run under ``OUT/runs`` as it ran (its ``config.json``): what the report states about it."""

    task: str  # the task its directory is named for
    env: str  # the env it trained, by today's name: what ``--tasks`` names to train it again
    agent: str  # the agent's name
    agent_arg: str | None  # ``--agent`` of the command that trains it; None: the config's own agent
    steps: int  # its loop.steps
    seeds: int
    overrides: tuple[str, ...]  # the ``--override`` arguments that give its settings on top of the protocol's
    changes: tuple[str, ...]  # "field protocol -> ran" for each setting of it that is not the protocol's
    action_repeat: int
    environment: dict | None  # its config.json's provenance block

    @property
    def settings(self) -> tuple:
        """What one command gives every task it trains."""
        return self.agent_arg, self.steps, self.seeds, self.overrides


def _toml(value) -> str:
    """A value as ``--override`` reads it (TOML): ``[16, 16]``, ``true``, ``"jax"``, ``0.0003``."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, str):
        return json.dumps(value)
    return "none" if value is None else repr(value)  # None has no TOML spelling: only a config file's default has it


def what_ran(plan: Plan, task: str, run_dir: str) -> Ran:
    """``run_dir``'s run as it ran, set against config ``plan.config_name``'s protocol for its env.

    The command and the changes come from the run's own config.json, neither from the command that writes the report
    (``--report-only`` has none of the runs' flags) nor from one recorded beside the run: the saved configs are what
    trained, every source applied (a ``--steps`` that continued it, a rerun with other flags, a run that ``jaxrl
    train`` put there), and diffing them against the protocol resolved today gives the ``--override``s that train the
    same run from today's config file, also where that file changed since. A directory without config.json (written
    by hand) is taken to hold the plan's settings."""
    from experiments import configs
    from jaxrl.loop import written_down

    config = configs.load(plan.config_name)
    own_agent = config.get("agent") or "sac"
    if os.path.exists(os.path.join(run_dir, "config.json")):
        saved = rundir.load_saved(run_dir)
        ran = rundir.resolve(saved=saved, run_dir=run_dir)
        agent_arg = None if saved.get("agent") == own_agent else saved.get("agent")
        run, loop, agent_cfg, environment = ran.run, ran.loop, ran.agent_cfg, saved.get("environment")
    else:
        agent_arg, environment = plan.agent_name, None
        run, loop, agent_cfg = plan.configs_for(task)
    try:
        protocol = rundir.resolve(agent_arg, config=plan.config_name, env=run.env)
        # At the run's steps: a loop default that depends on them (learning_starts) is what --steps gives.
        at_steps = rundir.resolve(agent_arg, config=plan.config_name, tables={"loop": {"steps": loop.steps}},
                                  env=run.env)
    except ConfigError as e:
        raise ConfigError(f"{run_dir} holds no run of config {plan.config_name}'s protocol ({e}); move it out of "
                          f"{os.path.dirname(run_dir)} to report on the others") from None
    if type(at_steps.agent_cfg) is not type(agent_cfg):
        raise ConfigError(f"{run_dir} holds a run of another agent than config {plan.config_name}'s ({own_agent}); "
                          f"move it out of {os.path.dirname(run_dir)} to report on the others")
    at_steps = dataclasses.replace(at_steps, loop=written_down(at_steps.loop))
    seeds = config["reproduce"].get("seeds", 1)
    changes = [f"loop.steps {protocol.loop.steps} -> {loop.steps}"] if loop.steps != protocol.loop.steps else []
    changes += [f"seeds {seeds} -> {run.seeds}"] if run.seeds != seeds else []
    overrides = []
    stated = {"run": protocol.run, "loop": written_down(protocol.loop), "agent_config": protocol.agent_cfg}
    for name, (_, after) in rundir.differences(at_steps, run, written_down(loop), agent_cfg).items():
        section, _, field = name.partition(".")
        # The env, seeds and steps are the command's own flags; run fields outside RUN_FIXED (checkpoints, logging)
        # change no result.
        if name in ("run.env", "run.seeds", "loop.steps") or section == "run" and field not in rundir.RUN_FIXED:
            continue
        overrides.append(f"{name}={_toml(after)}")
        # The protocol's value as the config states it (eval_every 100000, not the 3000 it shrinks to at --steps 3000)
        changes.append(f"{name} {_toml(getattr(stated[section], field))} -> {_toml(after)}")
    return Ran(task, run.env, at_steps.agent.name, agent_arg, loop.steps, run.seeds, tuple(overrides), tuple(changes),
               loop.action_repeat, environment)


def runs_under(plan: Plan, out_dir: str) -> list[tuple[str, str]]:
    """(task, run directory) of every run under ``out_dir/runs`` that has evaluated, whatever command trained it:
    the plan's tasks first, in its order, then the others."""
    import envs

    root = os.path.join(out_dir, "runs")
    names = {task.replace("/", "-"): task for task in [*envs.list_envs(), *plan.tasks]}
    order = {task.replace("/", "-"): k for k, task in enumerate(plan.tasks)}
    found = []
    for name in sorted(os.listdir(root) if os.path.isdir(root) else [], key=lambda n: (order.get(n, len(order)), n)):
        run_dir = os.path.join(root, name)
        if os.path.isfile(os.path.join(run_dir, "metrics.jsonl")) and len(curves(run_dir)[0]):
            found.append((names.get(name, name), run_dir))
    return found


def write_report(plan: Plan, out_dir: str, targets_path: str = TARGETS) -> str:
    """report.md (+ report.json and PNGs) from every run under ``out_dir`` as it ran: its tasks, commands, settings
    and numbers are the runs', whichever command trained them (``plan`` gives the protocol: config, published
    algorithm, description); returns the report's path."""
    targets = load_targets(targets_path, plan.algorithm)
    tasks, rows, per_task, environments, ran = [], [], {}, {}, {}
    for task, run_dir in runs_under(plan, out_dir):
        steps, returns = curves(run_dir)
        tasks.append(task)
        ran[task] = what_ran(plan, task, run_dir)
        environments[task] = ran[task].environment
        # The env the run trained, by today's name: a run saved before its task followed dm_control is Playground's.
        reason = not_comparable(ran[task].env, targets, plan.algorithm)
        # A task that is not comparable is never set beside a published number: no column, no point on its curve.
        published = targets.get(dmc_task_name(task) or task, []) if reason is None else []
        per_task[task] = (steps, returns, published)
        matched = [p for p in published if p["env_steps"] in set(steps.tolist())]
        points = [(p["env_steps"], p) for p in matched] or [(int(steps[-1]), None)]
        for step, pub in points:
            ours = returns[list(steps).index(step)]
            row = {"task": task, "env_steps": step, "seeds": ours.size, "returns": ours.tolist(),
                   "mean": float(ours.mean()),
                   "std": float(ours.std(ddof=1)) if ours.size > 1 else float("nan"), "not_comparable": reason}
            if pub is not None:
                row.update(published_mean=pub["mean"], published_std=pub["std"], published_seeds=pub["seeds"],
                           z=(row["mean"] - pub["mean"]) / pub["std"] if pub["std"] > 0 else float("nan"))
            rows.append(row)
        _plot_task(task, steps, returns, published, os.path.join(out_dir, f"curve_{task.replace('/', '-')}.png"),
                   plan.algorithm)
    if not tasks:
        raise ConfigError(f"no run under {out_dir}/runs has evaluated yet: nothing to report on")
    commands = commands_of(plan, ran)
    unfinished = {task: (int(per_task[task][0][-1]), r.steps) for task, r in ran.items()
                  if per_task[task][0][-1] < r.steps}
    aggregate = _aggregate(plan, per_task, out_dir)
    path = os.path.join(out_dir, "report.md")
    # Atomic: a stop signal during the write leaves the previous report or none, never half of one.
    write_text_atomic(path, _markdown(plan, rows, aggregate, ran, commands, unfinished, out_dir, targets_path)
                      + _environment_section(environments))
    # The command and date make the file a results file a figure can cite (bench/reproduce_table.py). "command"
    # trains every run reported (one command, or one per set of settings joined by &&); "commands" per task.
    write_json(os.path.join(out_dir, "report.json"), {
        "config": plan.config_name, "algorithm": plan.algorithm, "tasks": tasks,
        "command": " && ".join(dict.fromkeys(commands.values())), "commands": commands,
        "changed_from_protocol": {task: list(r.changes) for task, r in ran.items()},
        "unfinished": {task: {"env_steps": done, "steps": steps} for task, (done, steps) in unfinished.items()},
        "written": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"), "rows": rows,
        "aggregate": aggregate, "environments": environments})
    return path


def commands_of(plan: Plan, ran: dict[str, Ran]) -> dict[str, str]:
    """{task: the command that trains its run}: one command for every task of the same settings."""
    groups: dict[tuple, list[str]] = {}
    for r in ran.values():
        groups.setdefault(r.settings, []).append(r.env)
    commands = {settings: command_line(plan.config_name, envs, *settings) for settings, envs in groups.items()}
    return {task: commands[r.settings] for task, r in ran.items()}


def _aggregate(plan: Plan, per_task, out_dir: str) -> dict[str, Any] | None:
    """Mean and IQM with 95 % stratified-bootstrap CIs (rliable) at the last env step every task reached."""
    if not plan.max_return:
        return None
    step = min(int(steps[-1]) for steps, _, _ in per_task.values())
    seeds = min(returns.shape[1] for _, returns, _ in per_task.values())
    scores = np.stack([returns[list(steps).index(step), :seeds] if step in steps else returns[-1, :seeds]
                       for steps, returns, _ in per_task.values()], axis=1) / plan.max_return  # [seeds, tasks]
    from rliable import library as rly
    from rliable import metrics

    def stats(x):
        return np.array([metrics.aggregate_mean(x), metrics.aggregate_iqm(x)])

    point, interval = rly.get_interval_estimates({"ours": scores}, stats, reps=2000)
    out = {"env_steps": step, "seeds": seeds, "tasks": len(per_task), "max_return": plan.max_return,
           "mean": float(point["ours"][0]), "mean_ci": [float(x) for x in interval["ours"][:, 0]],
           "iqm": float(point["ours"][1]), "iqm_ci": [float(x) for x in interval["ours"][:, 1]]}
    published = [next((p["mean"] for p in pub if p["env_steps"] == step), None) for _, _, pub in per_task.values()]
    if published and all(p is not None for p in published):
        out["published_mean_of_task_means"] = float(np.mean(published) / plan.max_return)
    _plot_aggregate(out, os.path.join(out_dir, "aggregate.png"), plan.algorithm)
    return out


def _plot_task(task, steps, returns, published, path, algorithm):
    """The task's seeds as ``jaxrl plot`` draws a run (mean and 95 % bootstrap band), with the published points."""
    from experiments.plot import Member, curve, draw

    members = [Member(task, {}, steps.astype(np.float64), returns[:, k]) for k in range(returns.shape[1])]
    draw([curve("ours", members)], path, "eval return", "env steps", task,
         [(f"published {algorithm} (mean ± std)", published)] if published else [])


def _plot_aggregate(agg, path, algorithm):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(5, 2.5))
    for i, name in enumerate(("mean", "iqm")):
        low, high = agg[f"{name}_ci"]
        ax.barh(i, high - low, left=low, height=0.5, color="tab:blue", alpha=0.5)
        ax.plot([agg[name]], [i], "k|", ms=14)
    if "published_mean_of_task_means" in agg:
        ax.axvline(agg["published_mean_of_task_means"], color="tab:red", ls="--", label=f"published {algorithm} mean")
        ax.legend(loc="lower right", fontsize=8)
    low = min(0.0, agg["mean_ci"][0], agg["iqm_ci"][0])
    ax.set_xlim(low, max(1.0, agg["mean_ci"][1], agg["iqm_ci"][1]))  # the whole score range: 0 to the max return
    ax.set_yticks([0, 1], ["mean", "IQM"])
    ax.set_xlabel(f"normalised score (return / {agg['max_return']:g}) at {agg['env_steps']:,} env steps")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def _fmt(x, digits=0):
    return "n/a" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{digits}f}"


def command_line(config: str, tasks: list[str], agent: str | None, steps: int, seeds: int,
                 overrides: tuple[str, ...] = ()) -> str:
    """The command that trains ``tasks`` with these settings (and so reproduces the report's runs)."""
    import shlex

    return (f"jaxrl reproduce {shlex.quote(config)} --tasks {' '.join(tasks)} --steps {steps} --seeds {seeds}"
            + (f" --agent {agent}" if agent else "") + "".join(f" --override {shlex.quote(o)}" for o in overrides))


def _same_for_all(ran: dict[str, Ran], what) -> str:
    """``what`` of the runs: one value when they share it, else each value with the tasks that have it."""
    tasks_of: dict[str, list[str]] = {}
    for task, r in ran.items():
        tasks_of.setdefault(what(r), []).append(task)
    if len(tasks_of) == 1:
        return next(iter(tasks_of))
    return "; ".join(f"{', '.join(tasks)}: {value}" for value, tasks in tasks_of.items())


def _markdown(plan: Plan, rows, aggregate, ran: dict[str, Ran], commands: dict[str, str], unfinished, out_dir,
              targets_path) -> str:
    import envs

    tasks = list(ran)
    by_command: dict[str, list[str]] = {}
    for task, command in commands.items():
        by_command.setdefault(command, []).append(task)
    if len(by_command) == 1:
        command = [f"Command: `{next(iter(by_command))}`."]
    else:  # never one command that did not run: each set of settings its own
        command = ["The runs trained with different settings, by these commands:", "",
                   *[f"- {', '.join(t)}: `{c}`" for c, t in by_command.items()], ""]
    unfinished_text = ", ".join(f"{t} ({done:,} of {steps:,} env steps)" for t, (done, steps) in unfinished.items())
    missing = [t for t in plan.tasks if t not in ran]
    agents = sorted({r.agent_arg for r in ran.values() if r.agent_arg})
    repeat = _same_for_all(ran, lambda r: str(r.action_repeat))
    repeats = f"action repeat {repeat} included" if len({r.action_repeat for r in ran.values()}) == 1 \
        else f"each run's action repeat included: {repeat}"
    lines = [f"# Reproduction report: `{plan.config_name}` ({', '.join(sorted({r.agent for r in ran.values()}))})",
             "", f"Protocol (config `{plan.config_name}`): {plan.description}", "",
             *([f"**Unverified protocol settings**: {plan.unverified}", ""] if plan.unverified else []),
             # The protocol's prose above states the config's values: every one these runs changed is said here.
             *([f"**Changed from the protocol** in these runs (the values above are the protocol's): "
                f"{_same_for_all(ran, lambda r: ', '.join(r.changes) or 'none')}.", ""]
               if any(r.changes for r in ran.values()) else []),
             *([f"**Agent**: `{', '.join(agents)}` trained under this protocol in place of its own agent; the "
                f"published numbers are those of `{plan.algorithm}`.", ""] if agents else []),
             f"**Tasks**: this report covers every run under `{os.path.join(out_dir, 'runs')}` that has evaluated: "
             f"{', '.join(tasks)}."
             + (f" Not finished: {unfinished_text}; its command continues it." if unfinished else "")
             + (f" No run of {', '.join(missing)}." if missing else ""), "",
             *command,
             f"Env steps count simulator steps ({repeats}). Published numbers: `{os.path.basename(targets_path)}`, "
             f"algorithm `{plan.algorithm}`.", "",
             "## Per task", "",
             "| task | env steps | ours mean ± std (seeds) | published mean ± std (seeds) "
             "| (ours − published) / published std |",
             "|---|---|---|---|---|"]
    for r in rows:
        if r["not_comparable"]:
            pub = f"not comparable: {r['not_comparable']}"
        elif "published_mean" in r:
            pub = f"{_fmt(r['published_mean'])} ± {_fmt(r['published_std'])} ({r['published_seeds']})"
        else:
            pub = "no published point at this step"
        lines.append(f"| {r['task']} | {r['env_steps']:,} | {_fmt(r['mean'])} ± {_fmt(r['std'])} ({r['seeds']}) "
                     f"| {pub} | {_fmt(r.get('z'), 2)} |")
    lines += ["", "A row without a published point is our last evaluation: the published table has no point at an "
              "env step we evaluated (run longer, or evaluate at the published steps). A task marked not comparable "
              "is reported alone: its env is known to differ from the one the published numbers were measured on, "
              "or nothing is published for it.", ""]
    caveats = [(t, envs.physics_caveat(t)) for t in tasks]
    if any(c for _, c in caveats):
        lines += ["## Simulation", "",
                  "The same task, simulated differently from the published runs' simulator (docs/dmc_audit.md): a "
                  "known source of difference even where the task is comparable.", ""]
        lines += [f"- {t}: {c}." for t, c in caveats if c]
        lines += [""]
    if aggregate:
        lines += ["## Aggregate", "",
                  f"Scores are returns / {aggregate['max_return']:g} at {aggregate['env_steps']:,} env steps over "
                  f"{aggregate['tasks']} task(s) x {aggregate['seeds']} seed(s); 95 % stratified-bootstrap "
                  "confidence intervals from rliable (2,000 resamples).", "",
                  "| metric | ours | 95 % CI |", "|---|---|---|",
                  f"| mean | {aggregate['mean']:.3f} | "
                  f"[{aggregate['mean_ci'][0]:.3f}, {aggregate['mean_ci'][1]:.3f}] |",
                  f"| IQM | {aggregate['iqm']:.3f} | [{aggregate['iqm_ci'][0]:.3f}, {aggregate['iqm_ci'][1]:.3f}] |"]
        if "published_mean_of_task_means" in aggregate:
            lines.append(f"| published: mean of task means | {aggregate['published_mean_of_task_means']:.3f} | "
                         "(per-seed published scores are not available, so no IQM or CI) |")
        else:
            lines += ["", "No published aggregate beside ours: it needs a comparable published point for every task "
                      "at this step."]
        alone = sorted({r["task"] for r in rows if r["not_comparable"]})
        if alone:
            lines += ["", f"Ours aggregates every task reported, including those not comparable: {', '.join(alone)}."]
        lines += ["", "![aggregate](aggregate.png)", ""]
    lines += ["## Learning curves", ""]
    lines += [f"![{t}](curve_{t.replace('/', '-')}.png)" for t in tasks]
    return "\n".join(lines) + "\n"


def _environment_section(environments: dict[str, dict | None]) -> str:
    """What produced the runs (``jaxrl.provenance``): one block when every task's run shares it, else a line per
    task and what differs."""
    from jaxrl import provenance

    blocks = list(environments.values())
    lines = ["", "## Environment", ""]
    if all(b is not None and not provenance.differences(blocks[0], b) for b in blocks):
        lines += ["Every run trained under:", "", "```", provenance.format_block(blocks[0]), "```"]
    else:
        lines += ["The runs did not all train under one stack (their config.json, `environment`):", ""]
        lines += [f"- {task}: {provenance.summary_line(block)}" for task, block in environments.items()]
    return "\n".join(lines) + "\n"


def note_unpublished(plan: Plan, targets_path: str = TARGETS) -> list[str]:
    """Before anything trains, one note per task the report cannot set beside a published number: no published
    result for the protocol's algorithm (e.g. a ``--tasks`` name outside the config's own list), or an env known to
    differ from the benchmark's (``envs.not_comparable``). Their runs are reported alone. Returns those tasks."""
    import envs
    from experiments.rundir import note

    targets = load_targets(targets_path, plan.algorithm)
    protocol = set(configs_tasks(plan.config_name))
    alone = []
    for task in plan.tasks:
        differs = envs.not_comparable(task)
        if differs is not None:
            note(f"{task} is not comparable with published {plan.algorithm} results: the env differs from the "
                 f"benchmark's ({differs}); the report shows its runs alone")
        elif not targets.get(dmc_task_name(task) or task):
            outside = "" if task in protocol else f", and it is not one of config {plan.config_name}'s tasks"
            note(f"{task} has no published {plan.algorithm} result in {targets_path}{outside}: the report shows its "
                 "runs without a published column")
        else:
            continue
        alone.append(task)
    return alone


def configs_tasks(config: str) -> list[str]:
    from experiments import configs

    return list(configs.load(config)["reproduce"].get("tasks", []))


def reproduce(config: str, out_dir: str, tasks=None, steps=None, seeds=None, overrides=(), quiet=False,
              targets_path: str = TARGETS, agent: str | None = None) -> str:
    plan = make_plan(config, tasks, steps, seeds, list(overrides), agent)  # every config check: nothing written yet
    check_run_dirs(plan, out_dir)
    note_unpublished(plan, targets_path)
    # A task refused when its turn comes (its env cannot be built, its program does not fit) leaves no empty
    # directory behind: those this command created and nothing was written into are removed.
    created = sorted({d for task in plan.tasks for d in rundir.missing_dirs(task_dir(out_dir, task))},
                     key=lambda d: d.count(os.sep), reverse=True)
    try:
        os.makedirs(out_dir, exist_ok=True)
        run_tasks(plan, out_dir, quiet, checked=True)
    except BaseException:
        rundir.remove_if_empty(created)
        raise
    return write_report(plan, out_dir, targets_path)
