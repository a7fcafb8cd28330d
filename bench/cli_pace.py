"""The command line's steady pace against bench/sac_vs_brax.py's on the same config, measured back to back.

    python bench/cli_pace.py                                   # dmc/CartpoleSwingup, 16 envs, chunks of 3072 steps
    python bench/cli_pace.py --env brax/hopper --chunks 8 --out bench/results/cli_pace.jsonl
    python bench/cli_pace.py --table bench/results/cli_pace.jsonl  # the docs' table from such a file

The config is sac_vs_brax's (SAC, batch 256, 2x256, one update per env step, learning from the first step, one
evaluation env, a chunk of ``--chunk-steps`` env steps ending with one evaluation). The bench side is
``sac_vs_brax.ours``: a chunk compiled ahead and timed alone with ``block_until_ready``, the best of two, with and
without its evaluation. The CLI side is ``jaxrl train`` at the same settings as a user types it (its own process,
no persistent compilation cache), read back from its ``metrics.jsonl``: each chunk's pace is its env steps over the
wall time between its row and the previous one (so logging, the NaN check, the progress bar and checkpoints count),
the steady pace the median over the chunks after the first. ``cli_cumulative_env_steps_per_s`` is what the CLI
prints and logs as ``env_steps_per_s``: env steps over the time spent inside chunks since the start, the first
chunk included. Prints one JSON line; ``--out`` appends it with provenance.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from sac_vs_brax import BATCH, ours


def cli_flags(num_envs: int, chunk_steps: int, chunks: int) -> list[str]:
    """``jaxrl train`` flags for sac_vs_brax.ours's config: eval_every is the chunk, learning starts at once."""
    return ["--num-envs", str(num_envs), "--action-repeat", "1", "--updates-per-step", "1",
            "--sac.batch-size", str(BATCH), "--num-eval-envs", "1", "--eval-every", str(chunk_steps),
            "--learning-starts", "0", "--buffer-size", str(max(100_000, 4 * chunk_steps)),
            "--steps", str(chunks * chunk_steps), "--compilation-cache", "None"]


def cli_pace(env_name: str, num_envs: int, chunk_steps: int, chunks: int) -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        run_dir = os.path.join(tmp, "run")
        args = ["train", "--env", env_name, *cli_flags(num_envs, chunk_steps, chunks), "--run-dir", run_dir]
        subprocess.run([sys.executable, "-m", "experiments.cli", *args], check=True, capture_output=True,
                       cwd=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
        rows = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
        summary = json.load(open(os.path.join(run_dir, "summary.json")))
    steps = [r["env_steps"] for r in rows]
    walls = [r["wall_s"] for r in rows]
    per_chunk = [(steps[i] - steps[i - 1]) / (walls[i] - walls[i - 1]) for i in range(1, len(rows))]
    # env_steps_per_s is cumulative: steps run over the seconds spent in run_chunk and fetching its metrics.
    in_chunks = [r["env_steps"] / r["env_steps_per_s"] for r in rows]
    host = [(walls[i] - walls[i - 1]) - (in_chunks[i] - in_chunks[i - 1]) for i in range(1, len(rows))]
    return {"cli_command": "jaxrl " + " ".join(args[:-2]), "cli_chunk_env_steps_per_s": per_chunk,
            "cli_chunk_s": [in_chunks[i] - in_chunks[i - 1] for i in range(1, len(rows))], "cli_host_s": host,
            "cli_steady_env_steps_per_s": statistics.median(per_chunk),
            "cli_cumulative_env_steps_per_s": rows[-1]["env_steps_per_s"], "cli_compile_s": summary["compile_s"]}


def table(rows: list[dict]) -> list[str]:
    lines = ["| env | num_envs | chunk env steps | bench env steps/s (with its evaluation) | CLI steady env steps/s "
             "(median of chunks 2..n) | CLI chunks 2..n | CLI median / bench | CLI best / bench | CLI host ms per "
             "chunk (mean) | CLI's logged env_steps_per_s |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        chunks = ", ".join(f"{x:.0f}" for x in r["cli_chunk_env_steps_per_s"])
        bench = r["bench_env_steps_per_s_with_eval"]
        host = f"{1e3 * statistics.mean(r['cli_host_s']):.1f}" if "cli_host_s" in r else "not recorded"
        lines.append(f"| `{r['env']}` | {r['num_envs']} | {r['chunk_env_steps']} | {bench:.1f} | "
                     f"{r['cli_steady_env_steps_per_s']:.1f} | {chunks} | "
                     f"{r['cli_steady_over_bench_with_eval']:.2f}x | "
                     f"{max(r['cli_chunk_env_steps_per_s']) / bench:.2f}x | {host} | "
                     f"{r['cli_cumulative_env_steps_per_s']:.1f} |")
    return lines


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="dmc/CartpoleSwingup")
    parser.add_argument("--num-envs", type=int, default=16)
    parser.add_argument("--chunk-steps", type=int, default=3072, help="env steps per chunk (a multiple of num-envs)")
    parser.add_argument("--chunks", type=int, default=6, help="chunks of the CLI run (the first is not steady)")
    parser.add_argument("--repeats", type=int, default=1, help="bench then CLI, this many times (one line each)")
    parser.add_argument("--out", help="append the line, with provenance, to this JSONL file")
    parser.add_argument("--table", metavar="JSONL", help="print the markdown table of such a file and stop")
    args = parser.parse_args(argv)
    if args.table:
        print("\n".join(table([json.loads(line) for line in open(args.table)])))
        return
    if args.chunks < 3 or args.chunk_steps % args.num_envs:
        parser.error(f"--chunks {args.chunks} must be >= 3 and --chunk-steps {args.chunk_steps} a multiple of "
                     f"--num-envs {args.num_envs}")

    for _ in range(args.repeats):
        measure(args)


def measure(args) -> None:
    """One line: the bench's chunk, then the CLI's run, back to back (this machine's pace drifted by up to 20% within
    minutes, so a ratio is only as good as the two sides' closeness in time)."""
    bench = ours(args.env, args.num_envs, args.chunk_steps)
    row = {"env": args.env, "num_envs": args.num_envs, "chunk_env_steps": args.chunk_steps,
           "bench_env_steps_per_s": bench["ours_env_steps_per_s"],
           "bench_env_steps_per_s_with_eval": bench["ours_env_steps_per_s_with_eval"],
           "bench_eval_s": bench["eval_s"], **cli_pace(args.env, args.num_envs, args.chunk_steps, args.chunks)}
    row["cli_steady_over_bench_with_eval"] = row["cli_steady_env_steps_per_s"] / row["bench_env_steps_per_s_with_eval"]
    row["cli_best_over_bench_with_eval"] = (max(row["cli_chunk_env_steps_per_s"])
                                            / row["bench_env_steps_per_s_with_eval"])
    row["cli_cumulative_over_bench_with_eval"] = (row["cli_cumulative_env_steps_per_s"]
                                                  / row["bench_env_steps_per_s_with_eval"])
    print(json.dumps(row), flush=True)
    if args.out:
        from jaxrl.provenance import stamp

        with open(args.out, "a") as f:
            f.write(json.dumps({**row, "provenance": stamp()}) + "\n")


if __name__ == "__main__":
    main()
