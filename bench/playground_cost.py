"""What MuJoCo Playground costs a process before its first env step: importing it, loading its robot tasks, and
compiling a robot's reset and step.

    python bench/playground_cost.py --out bench/results/playground_cost_cpu.jsonl   # measure (replaces the file)
    python bench/playground_cost.py --table bench/results/playground_cost_cpu.jsonl  # the docs' tables

* ``import``: ``import mujoco_playground`` in a fresh process (``jax`` and ``envs.registry`` imported first and not
  counted), with NVIDIA Warp (``JAXRL_IMPORT_WARP=1``: what MJX does on its own) and without (``envs.registry
  .import_mjx``: what jaxrl does on a CPU-only JAX), alternating, ``--repeats`` times each.
* ``load``: ``envs.registry.make_raw`` of every ``locomotion/`` and ``manipulation/`` task in one process, after the
  suites are imported and the robot models linked (``envs/menagerie.py``), so each figure is the task's own load.
* ``compile``: ``jax.jit(reset)`` and ``jax.jit(step)`` of one unbatched env of each robot that
  ``tests/test_robots.py`` trains (``--robots``), traced, lowered and compiled from shapes alone (trace / lower /
  XLA compile seconds), caches cleared before each.

The persistent compilation cache is not set up, so every compile is cold.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from devtime import emit, latest, measured_on, read_rows  # noqa: E402

ROBOTS = ("locomotion/T1JoystickFlatTerrain", "locomotion/G1JoystickFlatTerrain", "locomotion/Go1JoystickFlatTerrain",
          "manipulation/LeapCubeRotateZAxis")
ROBOT_SUITES = ("locomotion", "manipulation")

# Run in a fresh interpreter: the import's seconds, jax's own start excluded (every process pays that).
IMPORT_PROBE = """
import sys, time
sys.path.insert(0, {root!r})
import jax
jax.default_backend()
from envs import registry
t0 = time.perf_counter()
registry.import_mjx()
import mujoco_playground
print(time.perf_counter() - t0)
"""


def import_seconds(with_warp: bool) -> float:
    env = {k: v for k, v in os.environ.items() if k != "JAXRL_IMPORT_WARP"}
    if with_warp:
        env["JAXRL_IMPORT_WARP"] = "1"
    done = subprocess.run([sys.executable, "-c", IMPORT_PROBE.format(root=ROOT)], env=env, capture_output=True,
                          text=True, check=True)
    return round(float(done.stdout.strip().splitlines()[-1]), 2)


def robot_names() -> list[str]:
    from envs import registry

    return [f"{prefix}/{task}" for prefix in ROBOT_SUITES for task in registry._playground_names(prefix)]


def measure_loads(out: str | None) -> None:
    from envs import registry

    for prefix in ROBOT_SUITES:
        registry._playground_suite(prefix)
    registry.use_packaged_menagerie()
    for name in robot_names():
        t0 = time.perf_counter()
        registry.make_raw(name)
        emit({"what": "load", "env": name, "seconds": round(time.perf_counter() - t0, 2)}, out)


def measure_compiles(robots: list[str], out: str | None) -> None:
    import jax
    from compile_time import timed_compile

    from envs import registry

    device = jax.devices()[0].device_kind
    for name in robots:
        raw = registry.make_raw(name)
        key = jax.ShapeDtypeStruct((2,), jax.numpy.uint32)
        state, _ = jax.eval_shape(raw.reset, key)
        action = jax.ShapeDtypeStruct((raw.action_size,), jax.numpy.float32)
        for function, fn, args in (("reset", raw.reset, (key,)), ("step", raw.step, (state, action))):
            jax.clear_caches()
            emit({"what": "compile", "env": name, "function": function, "device": device,
                  **timed_compile(fn, *args)}, out)


def mean(values: list[float]) -> float:
    return sum(values) / len(values)


def table(path: str) -> str:
    """The docs' figures of a results file: the import's seconds, every robot task's load, each robot's compiles."""
    rows = read_rows(path)
    imports = {True: [], False: []}
    for r in rows:
        if r["what"] == "import":
            imports[r["warp"]].append(r["seconds"])
    if not all(imports.values()) or not any(r["what"] == "load" for r in rows):
        raise SystemExit(f"{path}: no import times with and without Warp, or no loads: not a file this script wrote")
    lines = ["| `import mujoco_playground` | runs, s | mean s |", "|---|---|---|"]
    for warp, label in ((True, "with NVIDIA Warp (`JAXRL_IMPORT_WARP=1`)"),
                        (False, "without Warp (jaxrl's import on a CPU-only JAX)")):
        lines.append(f"| {label} | {', '.join(f'{s:.1f}' for s in imports[warp])} | {mean(imports[warp]):.1f} |")
    loads = {r["env"]: r["seconds"] for r in rows if r["what"] == "load"}
    slowest = max(loads, key=loads.get)
    lines += ["", f"All {len(loads)} robot tasks (`locomotion/`, `manipulation/`) load in {sum(loads.values()):.0f} s "
                  f"in one process, {min(loads.values()):.1f} to {loads[slowest]:.1f} s each (slowest: `{slowest}`).",
              "", "| robot | load s | `reset` compile s (trace / lower / XLA) "
                  "| `step` compile s (trace / lower / XLA) |",
              "|---|---|---|---|"]
    compiles = latest([r for r in rows if r["what"] == "compile"], "env", "function")
    for name in dict.fromkeys(r["env"] for r in compiles):
        cells = []
        for function in ("reset", "step"):
            c = next(r for r in compiles if (r["env"], r["function"]) == (name, function))
            cells.append(f"{c['total_s']:.1f} ({c['trace_s']:.1f} / {c['lower_s']:.1f} / {c['compile_s']:.1f})")
        lines.append(f"| `{name}` | {loads[name]:.1f} | " + " | ".join(cells) + " |")
    if "provenance" in rows[-1]:
        lines += ["", f"{measured_on(rows[-1]['provenance'], start=True)}."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--repeats", type=int, default=3, help="fresh processes per import setting")
    parser.add_argument("--robots", nargs="+", default=list(ROBOTS), help="robots whose reset and step compile")
    parser.add_argument("--out", default=None, help="also append the JSON lines (with provenance) to this file")
    parser.add_argument("--table", default=None, metavar="JSONL", help="print the docs' tables of a results file")
    args = parser.parse_args()
    if args.table:
        print(table(args.table))
        return
    if args.repeats < 1:
        parser.error(f"--repeats must be at least 1, got {args.repeats}")
    unknown = [name for name in args.robots if name not in robot_names()]
    if unknown:
        parser.error(f"--robots: {', '.join(unknown)} not a locomotion/ or manipulation/ task "
                     "(`jaxrl envs` lists them)")
    if args.out:  # one measurement per file: its tables average the import runs they find
        open(args.out, "w").close()
    for _ in range(args.repeats):
        for with_warp in (True, False):
            emit({"what": "import", "warp": with_warp, "seconds": import_seconds(with_warp)}, args.out)
    measure_loads(args.out)
    measure_compiles(args.robots, args.out)


if __name__ == "__main__":
    main()
