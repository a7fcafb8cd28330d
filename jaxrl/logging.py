"""Host-side outputs of a run: metrics JSONL + CSV, TensorBoard events, learning curve PNG, summary.json, and
optionally a Weights & Biases run mirroring them."""
from __future__ import annotations

import csv
import io
import json
import os
import secrets
import string
import sys
from typing import Any

import numpy as np

from jaxrl import ConfigError
from jaxrl.files import disk_error, write_failure, write_text_atomic

# A run with several members logs each per-member metric as its mean under the metric's name, and member k's value
# in the column ``<metric>/<label><k>``: label "seed" for a --seeds run, "member" for a sweep group's program.
MEMBER_LABELS = ("seed", "member")


def member_column(metric: str, label: str, member: int) -> str:
    """The column of ``member``'s value of ``metric``."""
    return f"{metric}/{label}{member}"


def split_member_column(column: str) -> tuple[str, str, int] | None:
    """(metric, label, member) of a per-member column; None for any other column."""
    metric, _, last = column.rpartition("/")
    for label in MEMBER_LABELS:
        if metric and last.startswith(label) and last[len(label):].isdigit():
            return metric, label, int(last[len(label):])
    return None


def member_row(row: dict[str, Any], member: int) -> dict[str, Any]:
    """One member's own view of a logged row: the shared columns, with its per-member values in place of the means."""
    own = {name: value for name, value in row.items() if split_member_column(name) is None}
    for name, value in row.items():
        parts = split_member_column(name)
        if parts is not None and parts[2] == member:
            own[parts[0]] = value
    return own


def member_values(row: dict[str, Any], metric: str) -> list[Any]:
    """Every member's value of ``metric`` in a logged row, in member order; ``[row[metric]]`` without per-member
    columns (a one-member run)."""
    values = sorted((parts[2], value) for name, value in row.items()
                    if (parts := split_member_column(name)) is not None and parts[0] == metric)
    return [value for _, value in values] or [row[metric]]


class RunLogger:
    """Writes one row per chunk. Per-seed arrays are logged as their mean plus one column per seed.

    With ``write=False`` (the non-primary processes of a multi-host run) rows are computed but nothing is written.
    """

    def __init__(self, run_dir: str, resume_from_step: int | None = None, member_label: str = "seed",
                 write: bool = True, wandb_run: WandbRun | None = None):
        self.run_dir = run_dir
        self.wandb_run = wandb_run
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
                row.update({member_column(name, self.member_label, k): float(v) for k, v in enumerate(values)})
        for extra in ("env_steps_per_s", "wall_s"):
            if extra in metrics:
                row[extra] = float(metrics[extra])
        self.rows.append(row)
        if not self.write:
            return row
        self._write(self.jsonl_path, json.dumps(row) + "\n", atomic=False)
        self._rewrite_csv()
        try:
            scalars = tensorboard_scalars(row)
            for name, value in scalars.items():
                self.tb.add_scalar(name, value, row["env_steps"])
            self.tb.flush()
        except OSError as e:
            self._raise_write_failure(os.path.join(self.run_dir, "tensorboard"), 1024, e)
        if self.wandb_run is not None:
            self.wandb_run.log(scalars, row["env_steps"])
        return row

    def video(self, frames, fps: float, env_step: int, path: str) -> None:
        """An evaluation video (frames [T, H, W, 3] uint8, already written as the MP4 ``path``) into TensorBoard
        as an animated GIF image summary, and into W&B as the MP4."""
        if not self.write:
            return
        self.tb.file_writer.add_summary(_gif_summary("eval/video", frames, fps), env_step)
        self.tb.flush()
        if self.wandb_run is not None:
            self.wandb_run.video(path, fps, env_step)

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
            per_member = np.array([member_values(r, "eval/return") for r in rows], np.float64)
            if per_member.shape[1] > 1:
                ax.plot(steps, per_member, color="tab:blue", alpha=0.25, lw=1)
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


def tensorboard_scalars(row: dict[str, Any]) -> dict[str, float]:
    """The scalars of a logged row that TensorBoard (and W&B) get: the means, not the per-member columns."""
    return {name: value for name, value in row.items()
            if split_member_column(name) is None and name != "env_steps" and np.isfinite(value)}


def _gif_summary(tag: str, frames, fps: float):
    """A TensorBoard image summary holding an animated GIF (TensorBoard plays it). tensorboardX's add_video would
    encode the same through moviepy; Pillow, which matplotlib already needs, does it here."""
    from PIL import Image
    from tensorboardX.proto.summary_pb2 import Summary

    images = [Image.fromarray(np.asarray(f)) for f in frames]
    out = io.BytesIO()
    images[0].save(out, format="GIF", save_all=True, append_images=images[1:], duration=round(1000 / fps), loop=0)
    height, width = np.asarray(frames[0]).shape[:2]
    image = Summary.Image(height=height, width=width, colorspace=3, encoded_image_string=out.getvalue())
    return Summary(value=[Summary.Value(tag=tag, image=image)])


WANDB_RUN_FILE = "wandb_run.json"
WANDB_MISSING = "--wandb needs the wandb package: pip install 'jaxrl[wandb]'"


class WandbRun:
    """A Weights & Biases run that mirrors a run directory: the rows' TensorBoard scalars at their env step, the
    resolved config (``config.json``, with each member's swept values in a sweep program), ``summary.json`` at the
    end, and videos. Its id is kept in ``RUN_DIR/wandb_run.json``: a resumed run continues the same W&B run, and the
    rows it recomputes after its checkpoint (bitwise the same values) are not logged twice. Offline runs
    (``WANDB_MODE=offline``) write under ``RUN_DIR/wandb/``; ``wandb sync`` uploads them. Only the process that
    writes the run directory (process 0) creates one."""

    def __init__(self, run_dir: str, config: dict[str, Any], project: str, entity: str | None = None,
                 group: str | None = None, tags: tuple[str, ...] = ()):
        try:
            import wandb
        except ImportError:
            raise ConfigError(WANDB_MISSING) from None
        from jaxrl.files import write_json

        id_path = os.path.join(run_dir, WANDB_RUN_FILE)
        saved = None
        if os.path.exists(id_path):
            with open(id_path) as f:
                saved = json.load(f)
        # W&B's own id format (8 characters of [a-z0-9]); wandb.util no longer exposes its generator.
        run_id = saved["id"] if saved else "".join(secrets.choice(string.ascii_lowercase + string.digits)
                                                   for _ in range(8))
        self.id_path, self.saved = id_path, saved or {"id": run_id, "project": project, "entity": entity}
        if saved is None:
            write_json(id_path, self.saved)
        try:
            self.run = wandb.init(project=saved["project"] if saved else project,
                                  entity=saved.get("entity") if saved else entity, group=group, tags=list(tags),
                                  id=run_id, resume="allow", dir=run_dir, name=os.path.basename(os.path.normpath(
                                      run_dir)), config=config, settings=wandb.Settings(console="off"))
        except Exception as e:  # noqa: BLE001 - wandb raises many kinds (auth, network, usage); all mean "no run"
            raise ConfigError(f"--wandb: W&B did not start a run ({type(e).__name__}: {str(e).splitlines()[0]}); "
                              "run `wandb login`, or set WANDB_MODE=offline to log without an account") from None
        self.id = run_id
        # The env step of the last row sent, kept beside the id (online and offline alike): a run killed after its
        # checkpoint recomputes those rows on resume, bitwise the same, and they are not sent again.
        self.logged_through = int(self.saved.get("logged_through", -1))

    def log(self, scalars: dict[str, float], env_step: int) -> None:
        from jaxrl.files import write_json

        if env_step > self.logged_through:
            self.run.log(dict(scalars), step=env_step)
            self.logged_through = env_step
            write_json(self.id_path, {**self.saved, "logged_through": env_step})

    def video(self, path: str, fps: float, env_step: int) -> None:
        import wandb

        self.run.log({"eval/video": wandb.Video(path, fps=round(fps), format="mp4")}, step=max(env_step,
                                                                                           self.logged_through))

    def finish(self, summary: dict[str, Any] | None = None, exit_code: int = 0) -> None:
        if summary:
            self.run.summary.update({k: v for k, v in summary.items() if k != "members"})
        self.run.finish(exit_code=exit_code)


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
