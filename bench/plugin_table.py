"""Issues 33 and 34's comparison table: each paper plug-in against its base agent, from the sweeps' results.

    python bench/plugin_table.py                 # the results committed under bench/results/
    python bench/plugin_table.py --markdown      # the same as the docs' table

Each pair ran through ``jaxrl sweep`` with the same env, env-step budget, seeds and loop (the sweep files beside the
results: ``bench/results/issue33_*.toml``, ``issue34_*.toml``, ``aql_swingup_*.toml``). A sweep's results are
``NAME.json`` where ``python bench/plugin_sweeps.py NAME`` measured them (its rows with the command, date, commit and
environment block that produced them), else the sweep's bare ``results.csv`` copied as ``NAME.csv`` before results
recorded their stack: such rows are marked †. Columns: the final and the best
evaluation return (mean +- std over the 3 seeds, and the seeds' values), and the wall time per env step and member
of the program that trained them all at once (compile excluded: ``run_s / env_steps / members``), with its ratio to
the base's.
"""
from __future__ import annotations

import argparse
import csv
import json
import os

import numpy as np

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results")

# (plug-in, its results, the base, the base's results, the task and budget); results by sweep name (see read)
PAIRS = [
    ("AQ-SAC", "aql_swingup_aq_sac", "SAC", "aql_swingup_sac", "dmc/CartpoleSwingup, 50k"),
    ("AQ-TD3", "issue33_swingup_aq_td3", "TD3", "issue33_swingup_td3", "dmc/CartpoleSwingup, 50k"),
    ("ARO-DDPG", "issue33_swingup_aro_ddpg", "TD3", "issue33_swingup_td3", "dmc/CartpoleSwingup, 50k"),
    ("BL-SAC (inferred)", "issue33_swingup_bl_sac", "SAC", "aql_swingup_sac", "dmc/CartpoleSwingup, 50k"),
    ("DR-SAC", "issue33_pendulum_dr_sac", "SAC", "issue33_pendulum_sac", "toy/Pendulum, 20k (nominal)"),
    ("DSAC-v1 (switches off)", "issue33_pendulum_dsac_v1", "DSAC-T", "issue33_pendulum_dsac_t",
     "toy/Pendulum, 20k, 1 update / step"),
    ("DSAC-v1 (switches off)", "issue33_swingup_dsac_v1", "DSAC-T", "issue33_swingup_dsac_t",
     "dmc/CartpoleSwingup, 50k, 1/20 update / step"),
    ("ACE", "issue34_finger_ace", "SAC", "issue34_finger_sac", "dmc/FingerSpin, 40k"),
    ("Symphony (width 256)", "issue34_swingup_symphony", "TD3", "issue33_swingup_td3", "dmc/CartpoleSwingup, 50k"),
]


def read(name: str) -> tuple[list[dict[str, str]], bool] | None:
    """(the sweep's results.csv rows, whether a stamp says what measured them); None where never measured."""
    path = os.path.join(RESULTS, name)
    if os.path.exists(f"{path}.json"):
        with open(f"{path}.json") as f:
            return json.load(f)["rows"], True
    if os.path.exists(f"{path}.csv"):
        with open(f"{path}.csv", newline="") as f:
            return list(csv.DictReader(f)), False
    return None


def returns(rows, field: str) -> str:
    values = np.array([float(r[field]) for r in rows])
    return f"{values.mean():.0f} ± {values.std():.0f} ({' / '.join(f'{v:.0f}' for v in values)})"


def ms_per_step(rows) -> float:
    """The program's run time per env step and member, in milliseconds (a program trains all its members at once,
    vmapped: a 6-member program against a 3-member one is compared per member)."""
    return 1000.0 * float(rows[0]["run_s"]) / float(rows[0]["env_steps"]) / float(rows[0]["group_members"])


def groups(rows) -> dict[str, list[dict[str, str]]]:
    """Members by their swept values (a results.csv has one column per swept field after the fixed ones)."""
    fixed = {"member", "member_id", "group", "member_in_group", "env", "seed", "final_eval_return",
             "best_eval_return", "env_steps", "compile_s", "run_s", "group_members", "commit"}
    swept = [f for f in rows[0] if f not in fixed]
    out: dict[str, list[dict[str, str]]] = {}
    for row in rows:
        out.setdefault(" ".join(f"{f}={row[f]}" for f in swept), []).append(row)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--markdown", action="store_true")
    args = parser.parse_args()
    header = ["plug-in", "base", "task, env steps", "final return", "best return", "ms / env step / member (ratio)"]
    lines, previous_base = [], None
    for name, plugin_results, base_name, base_results, task in PAIRS:
        plugin_read, base_read = read(plugin_results), read(base_results)
        if plugin_read is None or base_read is None:
            lines.append([name, base_name, task, "not measured", "", ""])
            continue
        (plugin, plugin_stamped), (base, base_stamped) = plugin_read, base_read
        if base_results != previous_base:  # the base above its plug-ins
            previous_base = base_results
            lines.append([base_name + ("" if base_stamped else " †"), "", task, returns(base, "final_eval_return"),
                          returns(base, "best_eval_return"), f"{ms_per_step(base):.2f}"])
        for label, rows in groups(plugin).items():
            lines.append([f"{name} {label}".strip() + ("" if plugin_stamped else " †"), base_name, task,
                          returns(rows, "final_eval_return"), returns(rows, "best_eval_return"),
                          f"{ms_per_step(rows):.2f} ({ms_per_step(rows) / ms_per_step(base):.2f}x)"])
    if args.markdown:
        print("| " + " | ".join(header) + " |")
        print("|" + "---|" * len(header))
        for line in lines:
            print("| " + " | ".join(line) + " |")
    else:
        widths = [max(len(str(x[i])) for x in [header, *lines]) for i in range(len(header))]
        for line in [header, *lines]:
            print("  ".join(str(x).ljust(w) for x, w in zip(line, widths, strict=True)))


if __name__ == "__main__":
    main()
