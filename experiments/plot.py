"""Learning curves of several runs or sweeps on one figure: the mean over seeds / members and its 95 % bootstrap band.

    jaxrl plot runs/sac-a runs/td3-b                         # one curve per run (its --seeds are the band)
    jaxrl plot sweeps/lr --by actor_lr --out lr.png          # a sweep's members grouped by a config field
    jaxrl plot runs/a runs/b --by agent --x wall_s           # wall time (compile included) on the x axis
    jaxrl plot runs/a --metric train/critic_loss

Each argument is a run directory (``config.json`` + ``metrics.jsonl``; a ``--seeds K`` run or a sweep program
contributes one member per seed / member) or a sweep output directory (``plan.json``; each finished member under
``members/<id>/``). Members are grouped into curves: by ``--by FIELD`` (an agent, loop or run field, ``seed``,
``env`` or ``agent``; ``section.field`` where a name is ambiguous), else one curve per run directory and, in a
sweep, one per combination of swept values (seeds pooled). A curve is the mean over its members at each x and a
95 % percentile-bootstrap band of that mean (rliable's stratified bootstrap, 2,000 resamples, members resampled
independently at each x); members logged at different x are linearly interpolated onto the x values they all
cover. The command prints each curve's members and final mean with its interval.
"""
from __future__ import annotations

import csv
import dataclasses
import json
import math
import os
from typing import Any

import numpy as np

from jaxrl import ConfigError

X_AXES = {"env_steps": "env steps", "wall_s": "wall time (s, compile included)"}
SECTIONS = ("agent_config", "loop", "run")


@dataclasses.dataclass
class Member:
    """One seed's curve: where it came from, its configuration (``config.json``'s tables) and its points."""

    source: str
    config: dict[str, Any]
    x: np.ndarray
    y: np.ndarray


@dataclasses.dataclass
class Curve:
    label: str
    x: np.ndarray
    mean: np.ndarray
    low: np.ndarray
    high: np.ndarray
    members: int


def _floats(values) -> np.ndarray:
    return np.array([float("nan") if v in (None, "") else float(v) for v in values], np.float64)


def _joined_wall_time(wall: np.ndarray) -> np.ndarray:
    """A resumed run's wall clock restarts in its new process: later segments continue where the last one ended."""
    out, offset = wall.copy(), 0.0
    for i in range(1, len(wall)):
        if wall[i] < wall[i - 1]:
            offset = out[i - 1]
        out[i] = wall[i] + offset
    return out


def _points(rows: list[dict[str, Any]], x_axis: str, ys: list[Any]) -> tuple[np.ndarray, np.ndarray]:
    """(x, y) of the rows whose x and y are finite."""
    x = _floats([r.get(x_axis) for r in rows])
    if x_axis == "wall_s":
        x = _joined_wall_time(x)
    y = _floats(ys)
    keep = np.isfinite(x) & np.isfinite(y)
    return x[keep], y[keep]


def _missing_metric(metric: str, where: str, columns) -> ConfigError:
    return ConfigError(f"--metric {metric!r} is not logged in {where}; it has: "
                       f"{', '.join(sorted({c for c in columns if '/' in c and c.count('/') < 2}))}")


def _run_members(run_dir: str, metric: str, x_axis: str) -> list[Member]:
    from experiments.export import members_of
    from experiments.rundir import load_saved
    from jaxrl.logging import member_values, read_rows

    saved = load_saved(run_dir)
    rows = read_rows(os.path.join(run_dir, "metrics.jsonl"))
    if rows and not any(metric in r for r in rows):
        raise _missing_metric(metric, run_dir, {c for r in rows for c in r})
    per_row = [member_values(r, metric) if metric in r else [] for r in rows]
    members = []
    for k, member in enumerate(members_of(saved)):
        config = {**saved, "seed": member["seed"], "agent_config": member["agent_config"], "env": saved["run"]["env"]}
        x, y = _points(rows, x_axis, [values[k] if k < len(values) else None for values in per_row])
        members.append(Member(run_dir, config, x, y))
    return members


def _sweep_members(out_dir: str, metric: str, x_axis: str) -> list[Member]:
    from experiments.sweep import member_dir, read_plan

    plan = read_plan(out_dir)
    members, unfinished = [], 0
    for entry in plan["members"]:
        where = member_dir(out_dir, entry["id"])
        if not os.path.exists(os.path.join(where, "summary.json")):
            unfinished += 1
            continue
        with open(os.path.join(where, "config.json")) as f:
            config = json.load(f)
        with open(os.path.join(where, "metrics.csv"), newline="") as f:
            rows = list(csv.DictReader(f))
        if rows and metric not in rows[0]:
            raise _missing_metric(metric, where, rows[0])
        x, y = _points(rows, x_axis, [r.get(metric) for r in rows])
        members.append(Member(out_dir, config, x, y))
    if unfinished:
        print(f"jaxrl: {out_dir}: {unfinished} member(s) have not finished; the plot leaves them out", flush=True)
    return members


def load_members(path: str, metric: str = "eval/return", x_axis: str = "env_steps") -> list[Member]:
    """Every member of a run directory or a sweep output directory, with its (x, metric) points."""
    from experiments import rundir
    from experiments.sweep import PLAN_FILE

    if x_axis not in X_AXES:
        raise ConfigError(f"--x {x_axis!r} is not one of: {', '.join(X_AXES)}")
    if rundir.kind(path) == "both":
        rundir.check_is_run(path, "directory")  # one line naming both kinds of files
    if os.path.exists(os.path.join(path, PLAN_FILE)):
        return _sweep_members(path, metric, x_axis)
    if os.path.exists(os.path.join(path, "config.json")):
        return _run_members(path, metric, x_axis)
    raise ConfigError(f"{path!r} is neither a run directory (config.json) nor a sweep output directory (plan.json)")


def field_value(config: dict[str, Any], name: str):
    """``name``'s value in a member's configuration: ``agent``, ``env``, ``seed``, a swept name, or a field of the
    agent, loop or run tables (``section.field`` to pick one); KeyError if none has it."""
    if name in ("agent", "env", "seed"):
        return config[name]
    if name in config.get("values", {}):
        return config["values"][name]
    section, _, field = name.rpartition(".")
    if section:
        return config[section][field]
    found = [config[s][name] for s in SECTIONS if name in config.get(s, {})]
    if not found:
        raise KeyError(name)
    return found[0]


def _value_text(value) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


def group_members(members_by_input: list[tuple[str, list[Member]]], by: str | None) -> dict[str, list[Member]]:
    """Curve label -> members: by ``by``'s value, else per input (and per swept-value combination in a sweep)."""
    groups: dict[str, list[Member]] = {}
    if by is not None:
        for path, members in members_by_input:
            for m in members:
                try:
                    value = field_value(m.config, by)
                except KeyError:
                    raise ConfigError(f"--by {by!r}: no such field in {path} (agent, env, seed, a swept name, or "
                                      "a field of agent_config, loop or run)") from None
                groups.setdefault(f"{by}={_value_text(value)}", []).append(m)
        return dict(sorted(groups.items(), key=lambda kv: _sort_key(field_value(kv[1][0].config, by))))
    names = [f"{members[0].config['agent']} {members[0].config['env']}" if members else os.path.basename(path)
             for path, members in members_by_input]
    for (path, members), name in zip(members_by_input, names, strict=True):
        if names.count(name) > 1:
            name = f"{name} ({os.path.basename(os.path.normpath(path))})"
        for m in members:
            swept = {k: v for k, v in m.config.get("values", {}).items() if k != "seed"}
            values = ", ".join(f"{k}={_value_text(v)}" for k, v in sorted(swept.items()))
            label = f"{name}: {values}" if swept else name
            groups.setdefault(label, []).append(m)
    return groups


def _sort_key(value):
    return (0, value, "") if isinstance(value, (int, float)) else (1, 0, str(value))


def curve(label: str, members: list[Member], reps: int = 2000) -> Curve:
    """Mean of the members at the x values they all cover, with a 95 % bootstrap band (a line without a band for a
    single member)."""
    members = [m for m in members if len(m.x)]
    if not members:
        return Curve(label, *(np.zeros(0),) * 4, members=0)
    start, stop = max(m.x[0] for m in members), min(m.x[-1] for m in members)
    x = np.unique(np.concatenate([m.x[(m.x >= start) & (m.x <= stop)] for m in members]))
    ys = np.stack([np.interp(x, m.x, m.y) for m in members])  # [members, points]
    mean = ys.mean(axis=0)
    if len(members) < 2 or not len(x):
        return Curve(label, x, mean, mean, mean, len(members))
    from rliable import library as rly

    _, interval = rly.get_interval_estimates({"c": ys}, lambda scores: scores.mean(axis=0), reps=reps)
    return Curve(label, x, mean, interval["c"][0], interval["c"][1], len(members))


def draw(curves: list[Curve], path: str, ylabel: str, xlabel: str = "env steps", title: str = "",
         published: list[tuple[str, list[dict[str, Any]]]] = ()) -> str:
    """One figure: each curve's mean and band, and published (label, [{env_steps, mean, std}]) points with std bars."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for i, c in enumerate(curves):
        color = colors[i % len(colors)]
        n = f"{c.members} seed{'s' if c.members != 1 else ''}"
        ax.plot(c.x, c.mean, color=color, lw=2, marker="o" if len(c.x) <= 20 else None, ms=3,
                label=f"{c.label} ({n}{', 95 % CI' if c.members > 1 else ''})")
        if c.members > 1:
            ax.fill_between(c.x, c.low, c.high, color=color, alpha=0.2, lw=0)
    for label, points in published:
        ax.errorbar([p["env_steps"] for p in points], [p["mean"] for p in points],
                    yerr=[0.0 if math.isnan(p["std"]) else p["std"] for p in points], fmt="s", color="black",
                    capsize=3, label=label)
    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title)
    ax.grid(alpha=0.3)
    if xlabel == X_AXES["env_steps"]:
        from matplotlib.ticker import EngFormatter

        ax.xaxis.set_major_formatter(EngFormatter(sep=""))  # 250k, 1M: env steps at a glance
    if curves or published:
        ax.legend(loc="best", fontsize=8)
    fig.tight_layout()
    save_figure(fig, path)
    plt.close(fig)
    return path


def figure_formats() -> tuple[str, ...]:
    """The file extensions matplotlib writes (``plot --out``'s check before anything is drawn)."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg

    return tuple(sorted(FigureCanvasAgg.get_supported_filetypes()))


def save_figure(fig, path: str) -> None:
    """Rendered to a temporary file and renamed, in the format of ``path``'s extension: a stop signal (which ends a
    short command at once, experiments/signals.py) or a crash mid-write leaves no half-written figure under
    ``path``."""
    import matplotlib

    from experiments.signals import REQUESTS, temporaries

    with REQUESTS.on_stop(temporaries(path)):
        tmp = f"{path}.tmp{os.getpid()}"
        try:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            fig.savefig(tmp, dpi=110, format=os.path.splitext(path)[1][1:].lower() or
                        matplotlib.rcParams["savefig.format"])
            os.replace(tmp, path)
        except OSError as e:  # a place the checks could not foresee (/proc, a full disk): one line
            raise ConfigError(f"--out {path} cannot be written ({e.strerror or e})") from None
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)


def plot_runs(paths: list[str], out: str, metric: str = "eval/return", by: str | None = None,
              x_axis: str = "env_steps") -> tuple[str, list[Curve]]:
    """``jaxrl plot``: the figure at ``out`` and its curves."""
    if not paths:
        raise ConfigError("give at least one run or sweep directory")
    members_by_input = [(p, load_members(p, metric, x_axis)) for p in paths]
    curves = [curve(label, ms) for label, ms in group_members(members_by_input, by).items()]
    if not any(c.members for c in curves):
        raise ConfigError(f"no {metric!r} values to plot in {', '.join(paths)}")
    _note_other_stacks([m for _, ms in members_by_input for m in ms])
    envs = sorted({m.config["env"] for _, ms in members_by_input for m in ms})
    title = ", ".join(envs) if len(envs) <= 3 else f"{len(envs)} envs"
    return draw(curves, out, metric, X_AXES[x_axis], title), curves


def _note_other_stacks(members: list[Member]) -> None:
    """One line per plotted input that trained under another stack than the first one (``jaxrl.provenance``):
    a difference between curves may then be the stack's, not the configs'."""
    from jaxrl import provenance

    first = members[0]
    said = set()
    for m in members[1:]:
        ours, theirs = first.config.get("environment"), m.config.get("environment")
        if ours is None and theirs is None:
            continue
        differs = (provenance.differences(ours, theirs) if theirs is not None
                   else ["no environment recorded (made before jaxrl recorded one)"])
        if differs and _where(m) not in said:
            said.add(_where(m))
            print(f"jaxrl: {_where(m)} trained under another stack than {_where(first)}: {'; '.join(differs)}",
                  flush=True)


def _where(member: Member) -> str:
    """A member's own directory: a sweep member's under OUT/members, else its run directory."""
    return os.path.join(member.source, "members", member.config["id"]) if "group" in member.config else member.source


# ------------------------------------------------------------------------------------------- PBT populations


def pbt_programs(path: str) -> list[str]:
    """The population-based training programs of ``path``: itself if it is a PBT program's run directory, else the
    PBT programs that hold a sweep's members (``OUT/groups/<name>``), in the order of the sweep file."""
    from experiments import rundir

    kind = rundir.kind(path)
    if kind == "run":
        if rundir.load_saved(path).get("pbt") is None:
            raise ConfigError(f"{path} is not a population-based training program (its config.json has no pbt)")
        return [path]
    if kind != "sweep":
        raise ConfigError(f"{path} is neither a run directory (config.json) nor a sweep's output (plan.json)")
    with open(os.path.join(path, "plan.json")) as f:
        entries = json.load(f)["members"]
    groups = []
    for entry in entries:
        config = os.path.join(path, "members", entry["id"], "config.json")
        if os.path.exists(config):
            with open(config) as f:
                saved = json.load(f)
            if saved.get("pbt") is not None:
                groups.append(os.path.join(path, saved["group_dir"]))
    if not groups:
        raise ConfigError(f"{path} holds no finished population-based training program (a sweep with a [pbt] table)")
    return list(dict.fromkeys(groups))


@dataclasses.dataclass
class Population:
    """A PBT program's history: env steps, every member's eval return [T, K], and each explored field's values
    [T + 1, K] (the first row the initial values, at env step 0), and which members copied at each step [T, K]."""

    source: str
    x: np.ndarray
    returns: np.ndarray
    values: dict[str, np.ndarray]
    copied: np.ndarray


def load_population(run_dir: str) -> Population:
    from jaxrl import pbt as pbt_lib
    from jaxrl.logging import member_values, read_rows

    with open(os.path.join(run_dir, "config.json")) as f:
        saved = json.load(f)
    cfg = pbt_lib.parse(saved["pbt"])
    rows = read_rows(os.path.join(run_dir, "metrics.jsonl"))
    x = np.array([r["env_steps"] for r in rows], np.float64)
    returns = np.array([member_values(r, "eval/return") for r in rows], np.float64)
    values = {}
    for item in cfg.explore:
        initial = [m["agent_config"][item.field] for m in saved["members"]]
        values[item.field] = np.array([initial] + [member_values(r, f"hparams/{item.field}") for r in rows],
                                      np.float64)
    copied = np.array([[int(p) != k for k, p in enumerate(member_values(r, "pbt/parent"))] for r in rows])
    return Population(run_dir, x, returns, values, copied)


def plot_population(run_dir: str, out: str) -> tuple[str, Population]:
    """``jaxrl plot --pbt``: the population's best and median evaluation return (each member faint), and each
    explored field's value per member over env steps (a dot where the member copied another)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    population = load_population(run_dir)
    fields = list(population.values)
    fig, axes = plt.subplots(1 + len(fields), 1, figsize=(7, 3 + 2.2 * len(fields)), sharex=True, squeeze=False)
    ax = axes[0, 0]
    x, returns = population.x, population.returns
    for k in range(returns.shape[1]):
        ax.plot(x, returns[:, k], color="grey", lw=0.7, alpha=0.5)
    ax.plot(x, np.nanmax(returns, axis=1), color="C0", lw=2, label="best member")
    ax.plot(x, np.nanmedian(returns, axis=1), color="C1", lw=2, label="median member")
    ax.set_ylabel("eval/return")
    ax.legend(loc="best", fontsize=8)
    ax.set_title(f"population of {returns.shape[1]}: {os.path.basename(os.path.normpath(run_dir))}", fontsize=9)
    steps = np.concatenate([[0.0], x])
    for i, name in enumerate(fields):
        ax = axes[i + 1, 0]
        values = population.values[name]
        for k in range(values.shape[1]):
            color = f"C{k % 10}"
            ax.step(steps, values[:, k], where="post", color=color, lw=1)
            hit = population.copied[:, k]
            ax.plot(x[hit], values[1:, k][hit], "o", color=color, ms=3)
        if np.all(values > 0):
            ax.set_yscale("log")
        ax.set_ylabel(name)
    for row in axes:
        row[0].grid(alpha=0.3)
    axes[-1, 0].set_xlabel(X_AXES["env_steps"])
    fig.tight_layout()
    save_figure(fig, out)
    plt.close(fig)
    return out, population
