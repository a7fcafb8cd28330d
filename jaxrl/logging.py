"""Host-side outputs of a run: metrics JSONL + CSV, TensorBoard events, learning curve PNG, summary.json."""
from __future__ import annotations

import csv
import io
import json
import os
import sys
from typing import Any

import numpy as np


def _scalar(value) -> float:
    return float(np.mean(value))


class RunLogger:
    """Writes one row per chunk. Per-seed arrays are logged as their mean plus one column per seed.

    With ``write=False`` (the non-primary processes of a multi-host run) rows are computed but nothing is written.
    """

    def __init__(self, run_dir: str, resume_from_step: int | None = None, member_label: str = "seed",
                 write: bool = True):
        self.run_dir = run_dir
        self.member_label = member_label  # per-member columns are name/<label>K ("member" in sweep groups)
        self.write = write
        self.rows: list[dict[str, Any]] = []
        if not write:
            return
        os.makedirs(run_dir, exist_ok=True)
        self.jsonl_path = os.path.join(run_dir, "metrics.jsonl")
        self.csv_path = os.path.join(run_dir, "metrics.csv")
        if resume_from_step is not None:
            # Rows written after the checkpoint we resume from will be produced again: drop them.
            self.rows = [r for r in read_rows(self.jsonl_path) if r["env_steps"] <= resume_from_step]
        self._write(self.jsonl_path, "".join(json.dumps(r) + "\n" for r in self.rows), atomic=True)
        self._rewrite_csv()
        from tensorboardX import SummaryWriter

        self.tb = SummaryWriter(os.path.join(run_dir, "tensorboard"), purge_step=resume_from_step)

    def log(self, metrics: dict[str, Any]) -> dict[str, Any]:
        row: dict[str, Any] = {"env_steps": int(metrics["env_steps"]), "updates": int(metrics["updates"])}
        for name, value in sorted(metrics.items()):
            if name in ("env_steps", "updates", "nonfinite_step"):
                continue
            values = np.atleast_1d(np.asarray(value, np.float64))
            row[name] = float(np.nanmean(values)) if np.isfinite(values).any() else float("nan")
            if values.size > 1:
                row.update({f"{name}/{self.member_label}{k}": float(v) for k, v in enumerate(values)})
        for extra in ("env_steps_per_s", "wall_s"):
            if extra in metrics:
                row[extra] = float(metrics[extra])
        self.rows.append(row)
        if not self.write:
            return row
        self._write(self.jsonl_path, json.dumps(row) + "\n", atomic=False)
        self._rewrite_csv()
        try:
            for name, value in row.items():
                if f"/{self.member_label}" not in name and name != "env_steps" and np.isfinite(value):
                    self.tb.add_scalar(name, value, row["env_steps"])
            self.tb.flush()
        except OSError as e:
            self._raise_write_failure(os.path.join(self.run_dir, "tensorboard"), 1024, e)
        return row

    def _rewrite_csv(self):
        # Rewritten whole: columns can appear later (e.g. losses once learning starts); runs log few rows.
        columns = sorted({k for r in self.rows for k in r}, key=lambda k: (k not in ("env_steps", "updates"), k))
        text = io.StringIO(newline="")
        writer = csv.DictWriter(text, fieldnames=columns)
        writer.writeheader()
        writer.writerows(self.rows)
        self._write(self.csv_path, text.getvalue(), atomic=True)

    @staticmethod
    def _write(path: str, text: str, atomic: bool) -> None:
        """Append a line, or replace a whole file atomically (a crash leaves the old or the new file). A full or
        read-only disk raises ``WriteError`` naming the path and the bytes."""
        try:
            if atomic:
                write_text_atomic(path, text)
            else:
                with open(path, "a") as f:
                    f.write(text)
        except OSError as e:
            RunLogger._raise_write_failure(path, len(text.encode()), e)

    @staticmethod
    def _raise_write_failure(path: str, needed: int, error: OSError):
        from jaxrl.checkpoint import disk_error, write_failure

        if disk_error(error) is None:
            raise error
        raise write_failure(path, needed, disk_error(error)) from None

    def plot(self, title: str) -> str | None:
        if not self.write:
            return None
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        path = os.path.join(self.run_dir, "learning_curve.png")
        rows = [r for r in self.rows if np.isfinite(r.get("eval/return", np.nan))]
        fig, ax = plt.subplots(figsize=(6, 4))
        if rows:
            steps = np.array([r["env_steps"] for r in rows])
            seed_cols = sorted(k for k in rows[-1] if k.startswith(f"eval/return/{self.member_label}"))
            for col in seed_cols:
                ax.plot(steps, [r.get(col, np.nan) for r in rows], color="tab:blue", alpha=0.25, lw=1)
            ax.plot(steps, [r["eval/return"] for r in rows], color="tab:blue", lw=2, label="eval return (mean)")
            ax.legend(loc="lower right")
        ax.set_xlabel("env steps")
        ax.set_ylabel("return")
        ax.set_title(title)
        ax.grid(alpha=0.3)
        fig.tight_layout()
        try:
            fig.savefig(path, dpi=100)
        except OSError as e:
            self._raise_write_failure(path, 100_000, e)
        finally:
            plt.close(fig)
        return path

    def close(self):
        if self.write:
            self.tb.close()


def read_rows(path: str) -> list[dict[str, Any]]:
    """The rows of a metrics.jsonl; a line a crash tore (the last one, half-written) is dropped with a note."""
    if not os.path.exists(path):
        return []
    rows = []
    with open(path) as f:
        for number, line in enumerate(f, 1):
            try:
                row = json.loads(line)
                if not isinstance(row, dict) or "env_steps" not in row:
                    raise ValueError("not a metrics row")
                rows.append(row)
            except ValueError:
                print(f"jaxrl: dropped line {number} of {path}: it is torn or not a metrics row", file=sys.stderr)
    return rows


def write_text_atomic(path: str, text: str) -> None:
    """Write, fsync, rename: a crash leaves either the old file or the new one, never a torn one."""
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "w", newline="") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_json(path: str, data: dict[str, Any]) -> None:
    """Atomic (``write_text_atomic``)."""
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=True, default=str))
