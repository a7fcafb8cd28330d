"""How long the tests take, measured: the README's and docs/getting-started.md's figures.

    python bench/test_time.py              # the quick tier twice (empty, then warm XLA cache); writes the results file
    python bench/test_time.py --readme     # the README's sentence from bench/results/test_time.json
    python bench/test_time.py --full       # the whole suite once, with the XLA cache an earlier run left
    python bench/test_time.py --full --empty-cache    # the whole suite once with an empty cache, as on a new machine
    python bench/test_time.py --full --readme    # getting-started's sentence from bench/results/test_time_full.json

Each run is ``python -m pytest -q -m quick -n 2`` from the repository root, timed as a process. The first runs
with ``HOME`` at a fresh temporary directory, so the suite's persistent XLA cache (``~/.cache/jaxrl/xla-tests``,
tests/conftest.py) starts empty as on a new machine; the second reuses it (warm), leaving the user's own cache
alone. ``bench/results/test_time.json`` keeps, per run, the cache state, the tests passed, the seconds and the
``jaxrl.provenance`` stamp (command, date, commit, environment); ``tests/test_figures.py`` checks the README's
sentence against ``--readme``. The whole suite (``python -m pytest -q -n 2``, the README's test command after the
install) takes about 50 minutes with an empty cache, so ``--full`` times it once with the cache the machine already has
(warm after an earlier run of the suite) and ``--full --empty-cache`` once with ``HOME`` at a fresh directory (the
cache and the assembled Playground assets start empty, as on a new machine); each replaces its own run in
``bench/results/test_time_full.json`` and keeps the other.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(ROOT, "bench", "results", "test_time.json")
FULL_RESULTS = os.path.join(ROOT, "bench", "results", "test_time_full.json")
QUICK = ["-m", "pytest", "-q", "-m", "quick", "-n", "2"]
FULL = ["-m", "pytest", "-q", "-n", "2"]


def measure(home: str | None, cache: str, tier: list[str] = QUICK) -> dict:
    """``tier`` run once with ``HOME=home`` (unchanged when None): its tests passed, skipped and seconds (the run must
    pass)."""
    sys.path.insert(0, ROOT)
    from jaxrl import provenance

    stamp = provenance.stamp(" ".join(["python", *tier]))  # the checkout as the run starts
    t0 = time.perf_counter()
    done = subprocess.run([sys.executable, *tier], cwd=ROOT, capture_output=True, text=True,
                          env={**os.environ, **({"HOME": home} if home else {})})
    seconds = time.perf_counter() - t0
    last = done.stdout.strip().splitlines()[-1] if done.stdout.strip() else ""
    passed, skipped = re.search(r"(\d+) passed", last), re.search(r"(\d+) skipped", last)
    if done.returncode != 0 or passed is None or re.search(r"\d+ (failed|error)", last):
        raise SystemExit(f"{' '.join(tier)} did not pass ({last or done.stderr.strip()[-300:]}); nothing written")
    return {**stamp, "cache": cache, "passed": int(passed.group(1)),
            "skipped": int(skipped.group(1)) if skipped else 0, "seconds": round(seconds, 1)}


def readme(path: str = RESULTS) -> str:
    """The README's sentence about the quick tier, from the results file."""
    with open(path) as f:
        runs = {r["cache"]: r for r in json.load(f)["runs"]}
    empty, warm = runs["empty"], runs["warm"]
    return (f"{empty['passed']} tests in {empty['seconds'] / 60:.1f} minutes on 2 cores with an empty compilation "
            f"cache, {warm['seconds'] / 60:.1f} with a warm one, measured on {empty['date'][:10]} at "
            f"{empty['commit'][:7] if empty['commit'] else 'no commit'}; `python bench/test_time.py` measures it "
            "into `bench/results/test_time.json`, `python bench/test_time.py --readme` prints this sentence")


WARM_FULL = "as an earlier run left it"


def full_sentence(path: str = FULL_RESULTS) -> str:
    """docs/getting-started.md's sentence about the whole suite, from its results file (the run with the cache an
    earlier run left, and the empty-cache run where the file has one)."""
    with open(path) as f:
        runs = {r["cache"]: r for r in json.load(f)["runs"]}
    if WARM_FULL not in runs:
        raise SystemExit(f"{path} holds no whole-suite run with the cache an earlier run left: measure one with "
                         "python bench/test_time.py --full")
    run = runs[WARM_FULL]
    sentence = (f"{run['passed']} tests passed ({run['skipped']} skipped) in {run['seconds'] / 60:.0f} minutes on 2 "
                f"cores with the compilation cache an earlier run left ({run['seconds']:.0f} s on {run['date'][:10]} "
                f"at {run['commit'][:7] if run['commit'] else 'no commit'} on an {run['environment']['cpu']['model']}; "
                "`python bench/test_time.py --full` measures it into `bench/results/test_time_full.json`")
    if "empty" in runs:
        empty = runs["empty"]
        sentence += (f"); with an empty cache, as on a new machine, {empty['passed']} passed in "
                     f"{empty['seconds'] / 60:.0f} minutes ({empty['seconds']:.0f} s on {empty['date'][:10]} at "
                     f"{empty['commit'][:7] if empty['commit'] else 'no commit'}; `python bench/test_time.py --full "
                     "--empty-cache`")
    return sentence + "; `python bench/test_time.py --full --readme` prints this sentence)"


def replacing(path: str, run: dict) -> list[dict]:
    """The runs of the results file at ``path`` (none if it does not exist) with ``run`` in place of the one with its
    cache state, the warm run first."""
    kept = []
    if os.path.exists(path):
        with open(path) as f:
            kept = [r for r in json.load(f)["runs"] if r["cache"] != run["cache"]]
    return sorted([*kept, run], key=lambda r: r["cache"] != WARM_FULL)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--readme", action="store_true", help="print the README's sentence from the results file")
    parser.add_argument("--full", action="store_true", help="the whole suite instead of the quick tier")
    parser.add_argument("--empty-cache", action="store_true",
                        help="with --full: run it with HOME at a fresh directory (an empty cache)")
    args = parser.parse_args()
    if args.empty_cache and not args.full:
        parser.error("--empty-cache times the whole suite: pass it with --full (the quick tier always runs both)")
    if args.readme:
        print(full_sentence() if args.full else readme())
        return 0
    from default_run import write_runs  # bench/ is this script's directory, first on sys.path

    if args.full:
        if args.empty_cache:
            with tempfile.TemporaryDirectory() as home:
                run = measure(home, "empty", FULL)
        else:
            run = measure(None, WARM_FULL, FULL)
        write_runs(FULL_RESULTS, replacing(FULL_RESULTS, run))
        print(full_sentence())
        return 0
    with tempfile.TemporaryDirectory() as home:
        runs = [measure(home, "empty"), measure(home, "warm")]
    write_runs(RESULTS, runs)
    print(readme())
    return 0


if __name__ == "__main__":
    sys.exit(main())
