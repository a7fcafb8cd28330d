"""The closing lines of bench/gpu_suite.sh: settings that never printed a row, then a compact table of all rows.

    python bench/suite_summary.py SUITE.jsonl --agents sac td3 --num-envs 1024 128 1 --env dmc/CheetahRun [--t1 1024]
    python bench/suite_summary.py --readme bench/results/gpu_suite_h200.jsonl bench/results/gpu_suite_h200_1env.jsonl

A setting of the throughput queue (or the FastTD3 T1 figure, with ``--t1``) without a row in SUITE.jsonl was cut
off by the suite's deadline or its process died: it gets a ``"skipped"`` row, appended to the file and printed.
Then one short line per row (the device tool returns only the last lines of a command's output).

``--readme`` prints the docs' GPU throughput table from committed suite files instead (a measured row of a later
file fills a setting an earlier file skipped); ``tests/test_figures.py`` checks the docs' copy against it.
"""
from __future__ import annotations

import argparse
import json

T1 = "locomotion/T1JoystickFlatTerrain"
ANCHOR = "FastTD3 paper, one A100, bf16: 15.2k env steps/s, <=15-33 ms per update"


def read(path: str) -> list[dict]:
    rows = []
    with open(path) as f:
        for line in f:
            line = line.strip()
            if line.startswith("{"):
                try:
                    rows.append(json.loads(line))
                except json.JSONDecodeError:
                    pass
    return rows


def num(x) -> str:
    """Three significant digits below 1000, whole numbers above."""
    return f"{x:.0f}" if abs(x) >= 1000 else f"{x:.3g}"


def short(row: dict) -> str:
    bench = row.get("bench")
    where = f"{row.get('agent', '?'):8s} {row.get('env', '?')} x{row.get('num_envs', '?')}"
    if "skipped" in row or "error" in row:
        kind = "SKIPPED" if "skipped" in row else "ERROR"
        return f"{bench:10s} {where}: {kind} {row.get('skipped', row.get('error'))}"
    if bench == "massive":
        return (f"{bench:10s} {where}: {num(row['train_env_steps_per_s'])} env steps/s (collect alone "
                f"{num(row['collect_env_steps_per_s'])}), {num(row['ms_per_update'])} ms/update x"
                f"{row['updates_per_batched_step']} per batched step, batch {row['batch_size']}, compile "
                f"{sum(row['compile_s'].values()):.0f} s [{ANCHOR}]")
    if bench == "throughput":
        return (f"{bench:10s} {where}: {num(row['train_env_steps_per_s'])} env steps/s, "
                f"{num(row['updates_per_s'])} updates/s ({row['updates_per_batched_step']:g}/batched step, batch "
                f"{row['batch_size']}), {num(row['ms_per_batched_step'])} ms/batched step, compile "
                f"{sum(row['compile_s'].values()):.0f} s")
    return f"{bench}: " + json.dumps(row)[:200]


def readme_table(paths: list[str]) -> str:
    """Training env steps/s per agent at 1024 / 128 / 1 envs and updates/s at 1024, from throughput rows."""
    measured, skipped, agents, device = {}, set(), [], None
    for path in paths:
        for row in read(path):
            if row.get("bench") != "throughput":
                continue
            key = (row["agent"], row["num_envs"])
            if row["agent"] not in agents:
                agents.append(row["agent"])
            if "train_env_steps_per_s" in row:
                measured[key], device = row, row.get("device_kind", device)
            else:
                skipped.add(key)

    def cell(agent, num_envs):
        if (agent, num_envs) in measured:
            return f"{measured[agent, num_envs]['train_env_steps_per_s']:,.0f}"
        return "(cut by the time budget)" if (agent, num_envs) in skipped else "not measured"

    lines = ["| agent | 1024 envs | 128 envs | 1 env | updates/s at 1024 |", "|---|---|---|---|---|"]
    order = ["sac", "td3", "dsac_t", "tqc", "simbav2", "tdmpc2", "fasttd3", "fastsac"]
    for agent in sorted(agents, key=lambda a: (order.index(a) if a in order else len(order), a)):
        big = measured.get((agent, 1024))
        updates = "not measured" if big is None else f"{big['updates_per_s']:,.0f}" + (
            f" (batch {big['batch_size']})" if big["batch_size"] != 256 else "")
        lines.append(f"| {agent} | {cell(agent, 1024)} | {cell(agent, 128)} | {cell(agent, 1)} | {updates} |")
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("path", nargs="+", help="the suite's JSON lines (several only with --readme)")
    parser.add_argument("--readme", action="store_true", help="print the docs' throughput table and write nothing")
    parser.add_argument("--agents", nargs="*", default=[])
    parser.add_argument("--num-envs", nargs="*", type=int, default=[])
    parser.add_argument("--env", default="dmc/CheetahRun")
    parser.add_argument("--t1", type=int, default=None, metavar="NUM_ENVS",
                        help="the suite measured FastTD3 on T1 at NUM_ENVS envs (bench/massive.py)")
    args = parser.parse_args()
    if args.readme:
        print(readme_table(args.path))
        return
    if len(args.path) != 1:
        parser.error("one suite file at a time (several only with --readme)")
    args.path = args.path[0]
    rows = read(args.path)
    missing = []
    if args.t1 is not None and not any(r.get("bench") == "massive" and r.get("env") == T1 for r in rows):
        missing.append({"bench": "massive", "config": "fasttd3_playground", "agent": "fasttd3", "env": T1,
                        "num_envs": args.t1, "skipped": "no row: cut off by the suite's deadline or its process died "
                        "(see logs/massive_t1.err)"})
    done = {(r.get("agent"), r.get("num_envs")) for r in rows if r.get("bench") == "throughput"}
    for agent in args.agents:
        for num_envs in args.num_envs:
            if (agent, num_envs) not in done:
                missing.append({"bench": "throughput", "agent": agent, "env": args.env, "num_envs": num_envs,
                                "skipped": "no row: cut off by the suite's deadline or its process died"})
    with open(args.path, "a") as f:
        for row in missing:
            line = json.dumps(row)
            print(line)
            f.write(line + "\n")
    print("--- summary")
    order = {agent: i for i, agent in enumerate(args.agents)}
    shown = [r for r in rows + missing if r.get("bench") in ("massive", "throughput")]
    for row in sorted(shown, key=lambda r: (r.get("bench") != "massive", order.get(r.get("agent"), 99),
                                            -(r.get("num_envs") or 0))):
        print(short(row))


if __name__ == "__main__":
    main()
