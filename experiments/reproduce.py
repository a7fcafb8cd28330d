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
  the results file a figure cites (``python bench/reproduce_table.py report.json`` prints the README's table).

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
    overrides: tuple[str, ...] = ()  # the --override arguments as given (the report's command repeats them)

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

    for task in tasks:  # every task's own values must be valid before the first one trains (one-line errors)
        task_config = rundir.resolve(agent_name, config=config, tables=tables, env=task)
        validate(task_config.run, task_config.loop)
    return Plan(agent, config, saved.get("description", ""), spec.get("algorithm", agent.name), tasks, seeds,
                spec.get("max_return"), run, loop, agent_cfg, tables, spec.get("unverified", ""), agent_name,
                tuple(overrides))


def _parse_value(text: str):
    import tomllib

    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def run_tasks(plan: Plan, out_dir: str, quiet: bool = False) -> None:
    from experiments.train import continue_or_start

    for task in plan.tasks:
        run_dir = os.path.join(out_dir, "runs", task.replace("/", "-"))
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


def write_report(plan: Plan, out_dir: str, targets_path: str = TARGETS) -> str:
    """report.md (+ report.json and PNGs) from the runs under ``out_dir``; returns the report's path."""
    targets = load_targets(targets_path, plan.algorithm)
    tasks, rows, per_task, environments = [], [], {}, {}
    for task in plan.tasks:
        run_dir = os.path.join(out_dir, "runs", task.replace("/", "-"))
        if not os.path.exists(os.path.join(run_dir, "metrics.jsonl")):
            continue
        steps, returns = curves(run_dir)
        if not len(steps):
            continue
        tasks.append(task)
        # The env the run trained, by today's name: a run saved before its task followed dm_control is Playground's.
        saved = os.path.exists(os.path.join(run_dir, "config.json"))
        trained = rundir.load_saved(run_dir)["run"]["env"] if saved else task
        environments[task] = rundir.load_saved(run_dir).get("environment") if saved else None
        reason = not_comparable(trained, targets, plan.algorithm)
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
        raise ConfigError(f"no finished runs under {out_dir}/runs to report on")
    aggregate = _aggregate(plan, per_task, out_dir)
    path = os.path.join(out_dir, "report.md")
    with open(path, "w") as f:
        f.write(_markdown(plan, rows, aggregate, tasks, targets_path) + _environment_section(environments))
    with open(os.path.join(out_dir, "report.json"), "w") as f:
        # The command and date make the file a results file a figure can cite (bench/reproduce_table.py).
        json.dump({"config": plan.config_name, "algorithm": plan.algorithm, "command": command_line(plan, tasks),
                   "written": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"), "rows": rows,
                   "aggregate": aggregate, "environments": environments}, f, indent=2)
    return path


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


def command_line(plan: Plan, tasks: list[str]) -> str:
    """The command that trains ``tasks`` under ``plan`` (and so reproduces the report's runs)."""
    return (f"jaxrl reproduce {plan.config_name} --tasks {' '.join(tasks)} --steps {plan.loop.steps} "
            f"--seeds {plan.seeds}" + (f" --agent {plan.agent_name}" if plan.agent_name else "")
            + "".join(f" --override {item}" for item in plan.overrides))


def _markdown(plan: Plan, rows, aggregate, tasks, targets_path) -> str:
    import envs

    lines = [f"# Reproduction report: `{plan.config_name}` ({plan.agent.name})", "",
             plan.description, "",
             f"Command: `{command_line(plan, tasks)}`. Env steps count simulator steps (action repeat "
             f"{plan.loop.action_repeat} included). Published numbers: `{os.path.basename(targets_path)}`, algorithm "
             f"`{plan.algorithm}`.", "",
             *([f"**Agent**: `{plan.agent_name}` trained under this protocol in place of its own agent; the published "
                f"numbers are those of `{plan.algorithm}`.", ""] if plan.agent_name else []),
             *([f"**Unverified protocol settings**: {plan.unverified}", ""] if plan.unverified else []),
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
    plan = make_plan(config, tasks, steps, seeds, list(overrides), agent)
    note_unpublished(plan, targets_path)
    os.makedirs(out_dir, exist_ok=True)
    run_tasks(plan, out_dir, quiet)
    return write_report(plan, out_dir, targets_path)
