"""Measure committed sweep files into stamped results files: the comparison table's (docs/plugins/papers.md) and any
other ``bench/results/NAME.toml`` a page cites (the fastsac_cpu sweeps of docs/benchmarks/massive.md).

    python bench/plugin_sweeps.py issue33_swingup_td3 issue33_swingup_aro_ddpg # these two sweep files
    python bench/plugin_sweeps.py --all                                        # the comparison's 15 (~3.5 h, 2 cores)
    python bench/plugin_sweeps.py --refresh issue34_swingup_symphony           # add curves from /tmp/sweeps/NAME
    python bench/plugin_sweeps.py --table fastsac_cpu_alpha_sweep              # every evaluation, from NAME.json

Each NAME is a sweep file ``bench/results/NAME.toml``: it runs as ``jaxrl sweep bench/results/NAME.toml --out
OUT/NAME`` would (in this process, members already finished under OUT reused) and writes
``bench/results/NAME.json``: the sweep's ``results.csv`` rows and ``provenance`` (``jaxrl.provenance.stamp``: this
command, the date the sweep started, the commit and the environment block), from which ``bench/plugin_table.py``
prints the table; ``curves``: each member's evaluations as ``[env_steps, eval/return, wall_s]`` (``wall_s`` from
the start of its program, compile included), for figures read at a step before the last; and ``final_metrics``: each
member's last logged row (the terms a page reads at the end). ``--refresh NAME`` adds the last two to a file written
before they were kept, from the sweep directory of the run it records; ``--table NAME...`` prints every evaluation
of every member of the named files as one markdown table, with what measured each. A JSON file rather than the CSV
alone because a CSV row cannot hold the nested environment block.
"""
from __future__ import annotations

import argparse
import csv
import glob
import json
import math
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench", "results")
PREFIXES = ("issue33_", "issue34_", "aql_swingup_")


def sweep_names(comparison_only: bool = True) -> list[str]:
    """The sweep files under bench/results/ by name (without ``.toml``): the comparison's, or all of them."""
    return sorted(os.path.basename(p)[:-5] for p in glob.glob(os.path.join(RESULTS, "*.toml"))
                  if os.path.basename(p).startswith(PREFIXES) or not comparison_only)


def member_metrics(sweep_dir: str, rows: list[dict[str, str]]) -> tuple[dict, dict]:
    """From each member's metrics.csv: ``curves`` {member_id: [[env_steps, eval/return, wall_s], ...]} (rows with a
    finite evaluation) and ``final_metrics`` {member_id: {column: value}} (its last row's finite values: the logged
    terms a page reads at the end of training)."""
    curves, final = {}, {}
    for row in rows:
        with open(os.path.join(sweep_dir, "members", row["member_id"], "metrics.csv"), newline="") as f:
            logged = list(csv.DictReader(f))
        curves[row["member_id"]] = [[int(m["env_steps"]), round(float(m["eval/return"]), 2),
                                     round(float(m["wall_s"]), 1)]
                                    for m in logged if finite(m.get("eval/return")) and finite(m.get("wall_s"))]
        final[row["member_id"]] = {k: float(v) for k, v in (logged[-1] if logged else {}).items() if finite(v)}
    return curves, final


def finite(text: str | None) -> bool:
    try:
        return math.isfinite(float(text))
    except (TypeError, ValueError):
        return False


def write(name: str, content: dict) -> None:
    """bench/results/NAME.json, replaced only once the whole content is ready (a failure leaves the old file)."""
    path = os.path.join(RESULTS, f"{name}.json")
    with open(path + ".tmp", "w") as f:
        json.dump(content, f, indent=1)
        f.write("\n")
    os.replace(path + ".tmp", path)


def refresh(name: str, sweep_dir: str) -> None:
    """Add ``curves`` and ``final_metrics`` to a results file written before it kept them, from the very run it
    describes: the sweep directory's results.csv must hold exactly the file's rows (same members, commit, returns)."""
    with open(os.path.join(RESULTS, f"{name}.json")) as f:
        content = json.load(f)
    with open(os.path.join(sweep_dir, "results.csv"), newline="") as f:
        rows = list(csv.DictReader(f))
    if rows != content["rows"]:
        raise SystemExit(f"{sweep_dir}/results.csv does not hold bench/results/{name}.json's rows; not refreshed")
    content["curves"], content["final_metrics"] = member_metrics(sweep_dir, rows)
    content["refreshed"] = " ".join(["python", *sys.argv])  # what added them, beside the stamp that measured them
    write(name, content)
    print(f"{name}: curves and final metrics of {len(rows)} members added from {sweep_dir}")


def table(names: list[str]) -> str:
    """A markdown table of the named results files: a row per member (its swept values and seed) with its return at
    each evaluation (columns by env steps to the nearest 500, blank where it had none) and its program's seconds
    (compile + run: a sweep's members share one program), then a line naming the command, date and commit that
    measured each file and the CPU."""
    contents = {}
    for name in names:
        path = os.path.join(RESULTS, f"{name}.json")
        if not os.path.exists(path):
            raise SystemExit(f"bench/results/{name}.json does not exist: measure it with "
                             f"python bench/plugin_sweeps.py {name}")
        with open(path) as f:
            contents[name] = json.load(f)
        if "curves" not in contents[name]:
            raise SystemExit(f"bench/results/{name}.json keeps no evaluations: add them with python "
                             f"bench/plugin_sweeps.py --refresh {name} (from its run's sweep directory)")

    def at(steps: int) -> float:  # thousands of env steps, to the nearest 500 (16 envs step 2016, 4032, ...)
        return round(steps / 500) / 2

    columns = sorted({at(steps) for c in contents.values() for curve in c["curves"].values() for steps, _, _ in curve})
    lines = ["| sweep | setting | seed | " + " | ".join(f"{k:g}k" for k in columns) + " | program s |",
             "|---" * (len(columns) + 4) + "|"]
    for name, content in contents.items():
        for row in content["rows"]:
            keys = list(row)  # results.csv's layout: the swept values sit between seed and final_eval_return
            swept = keys[keys.index("seed") + 1:keys.index("final_eval_return")]
            returns = {at(steps): value for steps, value, _ in content["curves"][row["member_id"]]}
            cells = " | ".join(f"{returns[k]:.0f}" if k in returns else "" for k in columns)
            seconds = float(row["compile_s"]) + float(row["run_s"])
            lines.append(f"| {name} | {' '.join(f'{key}={row[key]}' for key in swept)} | {row['seed']} | {cells} | "
                         f"{seconds:.0f} |")
    by_command: dict[str, list[str]] = {}
    for name, content in contents.items():
        stamp = content["provenance"]
        by_command.setdefault(stamp["command"], []).append(f"`{name}` {stamp['date'][:10]} at {stamp['commit'][:7]}")
    cpu = sorted({c["provenance"]["environment"]["cpu"]["model"] for c in contents.values()})
    measured = "; ".join(f"`{command}` ({', '.join(files)})" for command, files in by_command.items())
    return "\n".join([*lines, "", f"Measured by {measured}; {', '.join(cpu)}."])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("names", nargs="*", help="sweep files under bench/results/, without .toml")
    parser.add_argument("--all", action="store_true", help="every sweep file of the plug-in comparison")
    parser.add_argument("--out", default="/tmp/sweeps", help="where the sweeps' run directories go")
    parser.add_argument("--refresh", action="store_true",
                        help="add curves and final metrics to NAME.json from OUT/NAME, the run it records")
    parser.add_argument("--table", action="store_true",
                        help="print every evaluation of the named results files as a markdown table")
    args = parser.parse_args()
    names = sweep_names() if args.all else args.names
    unknown = sorted(set(names) - set(sweep_names(comparison_only=False)))
    if unknown or not names:
        parser.error(f"unknown sweep {unknown[0]!r}; choose from {', '.join(sweep_names(comparison_only=False))}"
                     if unknown else "name a sweep file or pass --all")
    if args.table:
        print(table(names))
        return 0
    if args.refresh:
        for name in names:
            refresh(name, os.path.join(args.out, name))
        return 0
    sys.path.insert(0, ROOT)
    import jax  # noqa: F401 - imported before the stamp so that it records the device

    from experiments import sweep as sweep_lib
    from jaxrl import provenance

    for name in names:
        stamp = provenance.stamp()
        out = os.path.join(args.out, name)
        t0 = time.perf_counter()
        sweep_lib.run_sweep(os.path.join(RESULTS, f"{name}.toml"), out, quiet=True)
        with open(os.path.join(out, "results.csv"), newline="") as f:
            rows = list(csv.DictReader(f))
        # A member finished under OUT by other code is reused by the sweep: its row must not pass under this stamp.
        here = sweep_lib.row_commit(stamp["environment"])  # as the sweep writes it in results.csv
        other = sorted({row.get("commit", "") for row in rows} - {here})
        if other:
            raise SystemExit(f"{out}: members measured at {', '.join(other)}, not this checkout's {here}; "
                             f"nothing written for {name} (remove {out} or pass another --out)")
        curves, final = member_metrics(out, rows)
        write(name, {"provenance": stamp, "sweep": f"jaxrl sweep bench/results/{name}.toml --out {out}",
                     "rows": rows, "curves": curves, "final_metrics": final})
        print(f"{name}: {len(rows)} members, {time.perf_counter() - t0:.0f} s -> bench/results/{name}.json",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
