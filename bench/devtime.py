"""Timing helpers shared by bench/massive.py and bench/throughput.py, for benchmarks that compile in parallel.

``bench/gpu_suite.sh`` runs several benchmark processes at once so that their XLA compiles (most of a suite's
time) overlap, while the accelerator runs one timed computation at a time:

* ``compile_ahead((fn, args), ...)`` compiles functions ahead of time (``jax.jit(fn).trace(*args).lower()
  .compile()``; the XLA compiles in parallel threads unless ``JAXRL_BENCH_SERIAL_COMPILE=1``) from shapes alone
  (``jax.ShapeDtypeStruct`` leaves are fine): no device work that a timed run could feel, so it needs no lock
  (XLA:GPU's autotuner does run candidate kernels while compiling).
* ``device_lock()`` holds an exclusive ``flock`` on the file named by ``JAXRL_BENCH_LOCK`` around everything that
  runs on the device (initial state, warm-up, timed calls); without that variable it does nothing.
* ``out_of_time(seconds)``: whether ``seconds`` more would pass ``JAXRL_BENCH_DEADLINE`` (Unix time; unset: never).
* ``measured_on(stamp)``: "measured on DATE at COMMIT on a N-core CPU with/without AVX-512", the words a
  generated table closes with; ``read_rows(path)`` a results file's lines (one-line errors), ``latest(rows, *fields)``
  the newest line per key (``--out`` appends: a re-measurement's lines replace the older ones in the tables).
* ``emit(row, out)`` prints one JSON line and appends it to ``out`` (when given) with the process's
  ``jaxrl.provenance`` stamp (command, date, commit, environment) under ``provenance``: the results file says what
  measured it, while the printed line stays short (the device tool returns only an output's last lines).
"""
from __future__ import annotations

import contextlib
import fcntl
import functools
import json
import os
import time

LOCK_ENV = "JAXRL_BENCH_LOCK"
DEADLINE_ENV = "JAXRL_BENCH_DEADLINE"
SERIAL_ENV = "JAXRL_BENCH_SERIAL_COMPILE"  # "1": one XLA compile at a time within a process


def compile_ahead(*jobs):
    """Compile functions ahead of time from argument shapes; ``jobs`` are ``(fn, args)`` or ``(fn, args,
    donate_argnums)``. Traces and lowers them one after another (Python), then runs their XLA compiles in parallel
    threads (XLA releases the GIL while it compiles). Returns [(compiled, [trace s, lower s, compile s]), ...]."""
    import concurrent.futures

    import jax

    lowered, parts = [], []
    for fn, args, *donate in jobs:
        t0 = time.perf_counter()
        traced = jax.jit(fn, donate_argnums=donate[0] if donate else ()).trace(*args)
        t1 = time.perf_counter()
        lowered.append(traced.lower())
        parts.append([round(t1 - t0, 2), round(time.perf_counter() - t1, 2)])

    def compile_one(k):
        t0 = time.perf_counter()
        compiled = lowered[k].compile()
        return compiled, parts[k] + [round(time.perf_counter() - t0, 2)]

    workers = 1 if os.environ.get(SERIAL_ENV) == "1" else len(jobs)
    with concurrent.futures.ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(compile_one, range(len(jobs))))


@contextlib.contextmanager
def device_lock():
    """Exclusive use of the device among the processes sharing ``$JAXRL_BENCH_LOCK``; yields the seconds waited."""
    path = os.environ.get(LOCK_ENV)
    if not path:
        yield 0.0
        return
    t0 = time.perf_counter()
    with open(path, "a") as f:
        fcntl.flock(f, fcntl.LOCK_EX)
        try:
            yield time.perf_counter() - t0
        finally:
            fcntl.flock(f, fcntl.LOCK_UN)


def seconds_left() -> float | None:
    deadline = os.environ.get(DEADLINE_ENV)
    return None if not deadline else float(deadline) - time.time()


def out_of_time(seconds: float) -> bool:
    left = seconds_left()
    return left is not None and left < seconds


@functools.cache
def _stamp() -> dict:
    from jaxrl import provenance

    return provenance.stamp()


def measured_on(stamp: dict, start: bool = False) -> str:
    """"measured on DATE at COMMIT on a N-core CPU with/without AVX-512" of a stamp (or of a run that carries
    ``date``, ``commit`` and ``environment``); ``start``: capitalised, to open a sentence."""
    cpu = stamp["environment"]["cpu"]
    avx512 = "with" if any(e.startswith("avx512") for e in cpu["extensions"]) else "without"
    dirty = (stamp["environment"].get("git") or {}).get("uncommitted") or 0
    commit = f"at {stamp['commit'][:7]}" if stamp.get("commit") else "outside a git checkout"
    if dirty:
        commit += f" with {dirty} uncommitted file{'s' if dirty != 1 else ''}"
    words = (f"measured on {stamp['date'][:10]} {commit} on a {cpu['cores']}-core {cpu['model']} {avx512} "
             "AVX-512")
    return words[0].upper() + words[1:] if start else words


def read_rows(path: str) -> list[dict]:
    """The JSON lines of a results file ``emit`` wrote; one line naming the file when it is missing, empty or not
    JSON lines."""
    try:
        with open(path) as f:
            rows = [json.loads(line) for line in f if line.strip()]
    except FileNotFoundError:
        raise SystemExit(f"{path}: no such results file") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise SystemExit(f"{path}: not a results file of JSON lines ({e})") from None
    if not rows:
        raise SystemExit(f"{path}: empty results file")
    return rows


def latest(rows: list[dict], *fields: str) -> list[dict]:
    """The last row for each value of ``fields``, in the order the values first appear: a results file measured
    again with ``--out`` appends, and its tables read the newest measurement."""
    newest = {}
    for row in rows:
        newest[tuple(row.get(field) for field in fields)] = row
    return list(newest.values())


def emit(row: dict, out: str | None) -> None:
    print(json.dumps(row), flush=True)
    if out:
        with open(out, "a") as f:
            f.write(json.dumps({**row, "provenance": _stamp()}) + "\n")
