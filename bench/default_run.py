"""The README's first command, measured: what a new user sees from ``jaxrl train`` (and from ``--steps 100000``).

    python bench/default_run.py                    # both runs (~10 min on 2 cores); writes the results file
    python bench/default_run.py --readme           # the README's sentence from bench/results/default_run.json
    python bench/default_run.py --command "jaxrl train --agent experiments.examples.redq:AGENT --steps 20000" \
        --out bench/results/redq_example.json       # any other command, measured the same way into its own file
    python bench/default_run.py --command "jaxrl train" --set XLA_FLAGS=--xla_cpu_max_isa=SSE4_2 --out F
    python bench/default_run.py --learning F       # a learning figure's lines from a file --command ... --out F wrote
    python bench/default_run.py --command "jaxrl train" --command "jaxrl train --checkpoint-minutes 1" \
        --out bench/results/checkpoint_cost.json
    python bench/default_run.py --checkpoints bench/results/checkpoint_cost.json  # the checkpoint cost's sentence

Each run is ``jaxrl train [--steps N]`` in a fresh working directory (outputs under its ``runs/``), timed as a
process, compile included (the persistent compilation cache is bypassed so the first run's compile counts, as on a
new machine). ``bench/results/default_run.json`` keeps, per command, the wall time, the final evaluation return,
the evaluation curve (and each evaluation's wall time since training started), the seconds spent writing
checkpoints (``summary.json``'s ``checkpoint_s``) and the size on disk of each checkpoint left, and the
``jaxrl.provenance`` stamp
(command, date, commit, environment); ``tests/test_figures.py`` checks the README's sentence against ``--readme``.
"""
from __future__ import annotations

import argparse
import glob
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench", "results", "default_run.json")
COMMANDS = (["jaxrl", "train"], ["jaxrl", "train", "--steps", "100000"])


def measure(command: list[str], variables: dict[str, str] | None = None, inspect=None) -> dict:
    """``command`` run as a process in a fresh directory, with ``variables`` added to its environment (written in
    front of the recorded command, as a shell line sets them). ``inspect(run_dir, output_lines) -> dict`` adds
    fields read from the run directory and the process's output before the directory is removed."""
    sys.path.insert(0, ROOT)
    from jaxrl import provenance

    variables = variables or {}
    with tempfile.TemporaryDirectory() as work:
        exe = os.path.join(os.path.dirname(sys.executable), command[0])
        t0 = time.perf_counter()
        with subprocess.Popen([exe, *command[1:], "--compilation-cache", "None"], cwd=work, text=True,
                              env={**os.environ, **variables}, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT) as process:
            output = []
            for line in process.stdout:  # shown as it comes, and kept for inspect
                print(line, end="", flush=True)
                output.append(line.rstrip("\n"))
        if process.returncode:
            raise SystemExit(f"{' '.join(command)} exited with {process.returncode}")
        wall = time.perf_counter() - t0
        (run_dir,) = glob.glob(os.path.join(work, "runs", "*"))
        extra = inspect(run_dir, output) if inspect else {}
        with open(os.path.join(run_dir, "summary.json")) as f:
            summary = json.load(f)
        with open(os.path.join(run_dir, "metrics.jsonl")) as f:
            rows = [row for row in map(json.loads, f) if "eval/return" in row]
        curve = [[row["env_steps"], row["eval/return"]] for row in rows]
        eval_wall = [round(row["wall_s"], 1) for row in rows]  # from the start of train(), compile included
        with open(os.path.join(run_dir, "config.json")) as f:
            environment = json.load(f)["environment"]
        checkpoints = {os.path.basename(step): round(directory_bytes(step) / 2**20, 2) for step in
                       sorted(glob.glob(os.path.join(run_dir, "checkpoints", "[0-9]*")), key=lambda d: int(
                           os.path.basename(d)))}
    typed = " ".join([f"{name}={value}" for name, value in variables.items()] + command)
    return {**provenance.stamp(typed), "environment": environment, "wall_s": round(wall, 1),
            "final_eval_return": summary["final_eval_return"], "env_steps": summary["env_steps"],
            "compile_s": round(summary["compile_s"], 1), "run_s": round(summary["run_s"], 1), "eval_curve": curve,
            "eval_wall_s": eval_wall, "checkpoint_s": round(summary["checkpoint_s"], 2), "checkpoints_mib": checkpoints,
            **extra}


def directory_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(parent, name)) for parent, _, names in os.walk(path) for name in names)


def write_runs(path: str, runs: list[dict]) -> None:
    """A results file of measured runs, each with its stamp (bench/test_time.py writes its file the same way)."""
    with open(path, "w") as f:
        json.dump({"runs": runs}, f, indent=1)
        f.write("\n")


def readme(path: str = RESULTS) -> str:
    """The README's sentence about the first command, from the results file."""
    with open(path) as f:
        runs = {r["command"]: r for r in json.load(f)["runs"]}
    short, long = runs["jaxrl train"], runs["jaxrl train --steps 100000"]
    cpu = short["environment"]["cpu"]
    avx512 = "with" if any(e.startswith("avx512") for e in cpu["extensions"]) else "without"
    return (f"{short['wall_s'] / 60:.1f} minutes on 2 cores ({short['wall_s']:.0f} s measured, compile included), "
            f"eval return from ≈0 to {short['final_eval_return']:.0f} (SAC's published score on this task is 835 ± 10 "
            f"at 100k env steps; `--steps 100000` reached {long['final_eval_return']:.0f} here in "
            f"{long['wall_s'] / 60:.1f} minutes; measured on {short['date'][:10]} at "
            f"{short['commit'][:7] if short['commit'] else 'no commit'} on an {cpu['model']} "
            f"({avx512} AVX-512); `python bench/default_run.py` measures both into `bench/results/default_run.json`, "
            "`python bench/default_run.py --readme` prints this sentence from it)")


def learning(path: str, threshold: float = 800) -> str:
    """One line per run of a learning-figure file (``--command ... --out F``): where its evaluation first reached
    ``threshold`` and where it ended, each with the wall time since the start of training (compile included)."""
    with open(path) as f:
        runs = json.load(f)["runs"]
    lines = []
    for run in runs:
        if "eval_wall_s" not in run or not run["eval_curve"]:
            raise SystemExit(f"{path}: {run['command']!r} has no evaluation wall times (written before they were "
                             "kept, or no evaluation); measure it again with --command ... --out")
        points = list(zip(run["eval_curve"], run["eval_wall_s"], strict=True))
        reached = next(((steps, wall) for (steps, value), wall in points if value >= threshold), None)
        first = (f"first ≥ {threshold:.0f} at {reached[0] / 1000:.0f}k env steps in {reached[1]:.0f} s" if reached
                 else f"never ≥ {threshold:.0f}")
        (steps, value), wall = points[-1]
        every = ", ".join(f"{v:.0f}" for _, v in run["eval_curve"])
        lines.append(f"- `{run['command']}`: {first}; {value:.0f} at {steps / 1000:.0f}k in {wall:.0f} s (evaluations "
                     f"{every}; {run['date'][:10]} at {(run['commit'] or 'no commit')[:7]}, "
                     f"{run['environment']['cpu']['model']})")
    return "\n".join(lines)


def checkpoint_cost(path: str) -> str:
    """run-directories.md's sentence on what checkpoints cost, from a file measuring ``jaxrl train`` and ``jaxrl
    train --checkpoint-minutes 1``."""
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    from devtime import measured_on

    with open(path) as f:
        runs = {r["command"]: r for r in json.load(f)["runs"]}
    missing = [c for c in ("jaxrl train", "jaxrl train --checkpoint-minutes 1")
               if c not in runs or "checkpoints_mib" not in runs[c]]
    if missing:
        raise SystemExit(f"{path}: no {' / '.join(missing)} run with checkpoint sizes (measure it with --command "
                         f"... --out {path})")
    default, often = runs["jaxrl train"], runs["jaxrl train --checkpoint-minutes 1"]

    def kept(run):
        return ", ".join(f"{mib:.1f}" for mib in run["checkpoints_mib"].values())

    n = len(default["checkpoints_mib"])
    first = (f"writes one checkpoint, at the end, in {default['checkpoint_s']:.2f} s and {kept(default)} MiB on disk"
             if n == 1 else f"spent {default['checkpoint_s']:.2f} s writing checkpoints and kept {n} ({kept(default)} "
             "MiB)")
    share = 100 * often["checkpoint_s"] / often["run_s"]
    return (f"Measured on the default run (SAC, `dmc/CartpoleSwingup`, 50k env steps, {default['wall_s'] / 60:.1f} "
            f"min): the default cadence {first}; with `--checkpoint-minutes 1` the same run spent "
            f"{often['checkpoint_s']:.2f} s writing checkpoints, {share:.1f} % of its {often['run_s']:.0f} s of "
            f"training, and kept the newest {len(often['checkpoints_mib'])} ({kept(often)} MiB; "
            f"{measured_on(default)}; "
            f"`python bench/default_run.py --checkpoints {path}`)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--readme", action="store_true", help="print the README's sentence from the results file")
    parser.add_argument("--command", action="append", help="measure this command line instead (repeatable)")
    parser.add_argument("--set", action="append", default=[], metavar="NAME=VALUE",
                        help="an environment variable for the measured commands (repeatable)")
    parser.add_argument("--out", help="results file for --command (default: the README's default_run.json)")
    parser.add_argument("--learning", metavar="FILE", help="print a learning figure's lines from this results file")
    parser.add_argument("--checkpoints", metavar="FILE", help="print the checkpoint cost's sentence from this file")
    args = parser.parse_args()
    if args.checkpoints:
        print(checkpoint_cost(args.checkpoints))
        return 0
    if args.readme:
        print(readme())
        return 0
    if args.learning:
        print(learning(args.learning))
        return 0
    if args.command:
        variables = dict(item.split("=", 1) for item in args.set)
        runs = [measure(command.split(), variables) for command in args.command]
        write_runs(args.out or RESULTS, runs)
        for run in runs:
            print(f"{run['command']}: {run['final_eval_return']} after {run['env_steps']} env steps, {run['wall_s']} s")
        return 0
    runs = [measure(command) for command in COMMANDS]
    write_runs(RESULTS, runs)
    print(readme())
    return 0


if __name__ == "__main__":
    sys.exit(main())
