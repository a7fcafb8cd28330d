"""Writing a run's files safely: atomic replacement, and one-line errors when the file system refuses a write
(disk full, read-only, quota). Checkpoints, metrics and the run directory's JSON files all write through it."""
from __future__ import annotations

import errno
import json
import os
import shutil
from typing import Any

# errnos that mean "this file system cannot take the write" rather than a bug.
WRITE_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EACCES, errno.EPERM, errno.EFBIG)


class WriteError(RuntimeError):
    """A run's file could not be written (disk full, read-only, quota): one line naming the path and the bytes."""


def disk_error(exc: BaseException) -> OSError | None:
    """The OSError behind ``exc`` when it is a full / read-only / forbidden file system, else None. Orbax and
    tensorstore wrap the OS error, sometimes only as text, so the chain and the message are both searched."""
    seen = exc
    while seen is not None:
        if isinstance(seen, OSError) and seen.errno in WRITE_ERRNOS:
            return seen
        seen = seen.__cause__ or seen.__context__
    text = str(exc)
    for code in WRITE_ERRNOS:
        if os.strerror(code) in text:
            return OSError(code, os.strerror(code))
    return None


def free_bytes(path: str) -> int:
    """Free bytes on the file system of ``path`` (or of its nearest existing parent)."""
    path = os.path.abspath(path)
    while not os.path.exists(path):
        path = os.path.dirname(path)
    return shutil.disk_usage(path).free


def write_failure(path: str, needed: int, error: OSError) -> WriteError:
    return WriteError(f"cannot write {path}: {error.strerror or error} ({needed / 2**20:.1f} MiB needed, "
                      f"{free_bytes(path) / 2**20:.1f} MiB free there); earlier checkpoints are intact")


def write_bytes_atomic(path: str, data: bytes) -> None:
    """Write, fsync, rename: a crash leaves either the old file or the new one, never a torn one."""
    tmp = f"{path}.tmp{os.getpid()}"
    try:
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def write_text_atomic(path: str, text: str) -> None:
    """``write_bytes_atomic`` of the UTF-8 text."""
    write_bytes_atomic(path, text.encode("utf-8"))


def write_json(path: str, data: dict[str, Any]) -> None:
    """Atomic (``write_text_atomic``)."""
    write_text_atomic(path, json.dumps(data, indent=2, sort_keys=True, default=str))


def csv_text(rows: list[dict[str, Any]]) -> str:
    """Rows as CSV text, the columns in order of first appearance."""
    import csv
    import io

    columns = list(dict.fromkeys(k for r in rows for k in r))
    buffer = io.StringIO()
    writer = csv.DictWriter(buffer, fieldnames=columns, lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return buffer.getvalue()
