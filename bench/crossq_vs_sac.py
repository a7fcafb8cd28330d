"""CrossQ against SAC at equal env steps on DMC tasks, as the CrossQ paper's DMC runs set both of them.

    python bench/crossq_vs_sac.py --agent crossq --task dmc/FingerSpin --steps 100000 --seeds 3 --run-dir DIR
    python bench/crossq_vs_sac.py --collect DIR1 DIR2 ... --out bench/results/crossq_vs_sac.jsonl
    python bench/crossq_vs_sac.py --table bench/results/crossq_vs_sac.jsonl

The protocol is section 3 ("DMC envs") of adityab/CrossQ ``slurm/submit_everything.sh`` (a318a26): CrossQ and its
SAC baseline both at learning rate 8e-4, one env without action repeat, one update per env step, 5,000 uniform
random steps first, a 1M-transition buffer; CrossQ at its official settings (config ``crossq_dmc``: critics 2048
wide with Batch Renormalization, Adam beta1 0.5, the actor every 3rd update, no target networks), SAC at the
baseline's (2x256, Adam beta1 0.9, the actor every update, target networks with tau 0.005: our SAC defaults, with
that learning rate). Both read their loop from ``crossq_dmc``'s ``[loop]`` table, so the two differ only in the
agent. Evaluation: 10 deterministic episodes every ``--eval-every`` env steps.

A training run goes through ``experiments.train.train``, the path of ``jaxrl train``, into ``--run-dir`` (its
``metrics.jsonl`` gains a row per evaluation, its ``config.json`` the environment block): a run stopped early (a
device's time limit) leaves the rows it reached. ``--collect`` turns run directories into one JSON line per
(agent, task) -- per-seed returns at every evaluation, the env steps reached, the training rate (env steps/s of
the chunks, compile excluded) and the run's provenance -- and ``--table`` prints the comparison at the largest
env-step count both agents of a task reached, with the cost ratio (CrossQ's seconds per env step over SAC's).
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

AGENTS = ("crossq", "sac")
CONFIG = "crossq_dmc"  # both agents' loop; CrossQ's agent settings
SAC_LR = 8e-4  # submit_everything.sh, section 3: LR='0.0008' for the SAC baseline too


def tables(agent_name: str, task: str, steps: int, seeds: int, eval_every: int,
           critic_width: int | None = None) -> tuple[str | None, dict]:
    """(named config, tables) for ``rundir.resolve``: CrossQ under its config, SAC under the config's loop.

    ``critic_width`` narrows CrossQ's two critic layers (the CPU protocol: 2048-wide critics cost ~0.2 s an update
    on two cores); SAC keeps its 2x256 either way."""
    from experiments import configs

    run = {"env": task, "seed": 0, "seeds": seeds, "checkpoint_minutes": 0.0}
    loop = {"steps": steps, "eval_every": eval_every, "num_eval_envs": 10}
    if agent_name == "crossq":
        narrowed = {"critic_hidden_sizes": [critic_width, critic_width]} if critic_width else {}
        return CONFIG, {"run": run, "loop": loop, "agent_config": narrowed}
    protocol = configs.for_task(configs.load(CONFIG), task)
    return None, {"run": run, "loop": {**protocol["loop"], **loop},
                  "agent_config": {"actor_lr": SAC_LR, "critic_lr": SAC_LR, "alpha_lr": SAC_LR}}


def train_one(agent_name: str, task: str, steps: int, seeds: int, eval_every: int, run_dir: str,
              critic_width: int | None = None) -> None:
    from experiments import rundir
    from experiments.train import train

    config, given = tables(agent_name, task, steps, seeds, eval_every, critic_width)
    resolved = rundir.resolve(agent_name, config=config, tables=given, where="bench/crossq_vs_sac.py", env=task)
    run = dataclasses.replace(resolved.run, run_dir=run_dir, overwrite=True)
    train(resolved.agent, run, resolved.loop, resolved.agent_cfg, quiet=True)


def collect(run_dir: str, command: str, carried_git: dict | None = None) -> dict:
    """One results line from a (possibly unfinished) run directory."""
    from jaxrl import provenance

    with open(os.path.join(run_dir, "config.json")) as f:
        saved = json.load(f)
    rows = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl")) if line.strip()]
    seeds = saved["run"]["seeds"]
    returns = [[round(r.get(f"eval/return/seed{k}", r["eval/return"]), 1) for r in rows] for k in range(seeds)]
    environment = saved.get("environment") or {}
    if carried_git and not (environment.get("git") or {}).get("commit"):
        environment = {**environment, "git": {**carried_git, "carried_from": "bench/gpu_carry.sh"}}
    stamp = provenance.stamp(command)
    stamp["environment"], stamp["commit"] = environment, (environment.get("git") or {}).get("commit")
    return {"bench": "crossq_vs_sac", "agent": saved["agent"], "task": saved["run"]["env"], "seeds": seeds,
            "critic_hidden_sizes": (saved.get("agent_config") or {}).get("critic_hidden_sizes"),
            "steps_asked": saved["loop"]["steps"], "eval_steps": [r["env_steps"] for r in rows], "returns": returns,
            "env_steps_per_s": rows[-1].get("env_steps_per_s") if rows else None,
            "device": (environment.get("devices") or {}), "provenance": stamp}


def _mean_std(values: list[float]) -> str:
    return f"{statistics.mean(values):.0f} ± {statistics.stdev(values) if len(values) > 1 else 0.0:.0f}"


def _rows(paths: list[str]) -> dict:
    lines = {}
    for path in paths:
        for line in open(path):
            row = json.loads(line)
            if row.get("bench") == "crossq_vs_sac":
                lines[(row["task"], row["agent"])] = row  # a later line replaces an earlier one
    return lines


def table(paths: list[str], cost_paths: list[str] | None = None) -> str:
    """Markdown: per task, CrossQ and SAC at the largest evaluation step both reached, and the cost ratio. With
    ``cost_paths`` (short runs on a machine doing nothing else, ``--steps`` past learning_starts) the rates are each
    agent's there (of any task: with one env, the update dominates), for long runs that shared the machine."""
    lines = _rows(paths)
    costs = {agent: row for (_, agent), row in _rows(cost_paths or []).items()}
    out = ["| task | env steps | CrossQ (critic widths) | SAC | CrossQ env steps/s | SAC env steps/s | cost ratio |",
           "|---|---|---|---|---|---|---|"]
    for task in sorted({t for t, _ in lines}):
        crossq, sac = lines.get((task, "crossq")), lines.get((task, "sac"))
        if not (crossq and sac):
            continue
        common = sorted(set(crossq["eval_steps"]) & set(sac["eval_steps"]))
        if not common:
            continue
        step = common[-1]

        def at(row, step=step):
            i = row["eval_steps"].index(step)
            return [seed[i] for seed in row["returns"]]

        rate_q = (costs.get("crossq") or crossq)["env_steps_per_s"]
        rate_s = (costs.get("sac") or sac)["env_steps_per_s"]
        widths = "x".join(str(w) for w in crossq.get("critic_hidden_sizes") or ()) or "?"
        out.append(f"| {task} | {step:,} | {_mean_std(at(crossq))} ({widths}) | {_mean_std(at(sac))} | {rate_q:.0f} | "
                   f"{rate_s:.0f} | {rate_s / rate_q:.2f} |")
    return "\n".join(out)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agent", choices=AGENTS)
    parser.add_argument("--task", default="dmc/FingerSpin")
    parser.add_argument("--steps", type=int, default=100_000)
    parser.add_argument("--seeds", type=int, default=3)
    parser.add_argument("--eval-every", type=int, default=10_000)
    parser.add_argument("--run-dir")
    parser.add_argument("--critic-width", type=int, help="CrossQ's critic width (default: the official 2048)")
    parser.add_argument("--collect", nargs="+", metavar="RUN_DIR")
    parser.add_argument("--carried-git", help="checkout.json of bench/gpu_carry.sh (the device's tree has no .git)")
    parser.add_argument("--command", default="", help="the command that produced the run directories (recorded)")
    parser.add_argument("--out")
    parser.add_argument("--table", nargs="+", metavar="RESULTS")
    parser.add_argument("--cost", nargs="+", metavar="RESULTS", help="with --table: rates from these (quiet) runs")
    args = parser.parse_args()
    if args.table:
        print(table(args.table, args.cost))
        return
    if args.collect:
        carried = json.load(open(args.carried_git)) if args.carried_git else None
        for run_dir in args.collect:
            row = json.dumps(collect(run_dir, args.command or " ".join(["python"] + sys.argv), carried))
            print(row)
            if args.out:
                with open(args.out, "a") as f:
                    f.write(row + "\n")
        return
    if not (args.agent and args.run_dir):
        parser.error("training needs --agent and --run-dir (or use --collect / --table)")
    train_one(args.agent, args.task, args.steps, args.seeds, args.eval_every, args.run_dir, args.critic_width)


if __name__ == "__main__":
    main()
