"""Stop signals: every signal that asks a process to end becomes a request that the command honours cleanly.

A closed terminal (SIGHUP), Ctrl-C (SIGINT), Ctrl-\\ (SIGQUIT), a scheduler's warning (SIGTERM; SLURM's
``--signal`` and submitit's SIGUSR1 / SIGUSR2) all mean "stop": none may lose a run or print a traceback.

Python's own SIGINT handler raises ``KeyboardInterrupt`` wherever the main thread happens to be, which is how
Ctrl-C went wrong: raised inside JAX's garbage-collection callback it is printed and *ignored* (the run trained on
and exited 0), raised inside XLA's compiler it is a 40-line traceback. So ``jaxrl`` replaces the handlers of every
stop signal as the first thing its ``main`` does, with one that only records the request (async-signal-safe: a
flag and one ``os.write``), and the command acts on it at points where stopping is clean:

* ``train`` (and each run of ``sweep`` / ``reproduce``): before the run writes its first file, a request ends the
  command with nothing written (``Stopped``); once the run holds its directory, at the next chunk boundary after a
  checkpoint of the whole state (``experiments.train.Interrupted``). Either way: one line, exit 128 + N.
* the short commands (``export``, ``video``, ``plot``, ...) hold no run: there the handler raises ``Stopped`` at
  once (``immediate``), and ``main`` turns it into the same one line and exit code.

The window before ``main`` runs (the interpreter starting, ~50 ms) keeps Python's default: a SIGINT there is a
``KeyboardInterrupt`` before anything is written.
"""
from __future__ import annotations

import contextlib
import os
import signal
import threading
from typing import Any

# SIGTERM: SLURM, Kubernetes, `kill`; SIGINT: Ctrl-C; SIGHUP: the terminal or SSH session closed; SIGQUIT: Ctrl-\;
# SIGUSR1 / SIGUSR2: a scheduler's warning before a time limit (SLURM --signal, submitit).
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1",
                                                        "SIGUSR2") if hasattr(signal, name))


def name(signum: int) -> str:
    return signal.Signals(signum).name


class Stopped(BaseException):
    """A stop signal ended a command before it wrote anything (a BaseException, like KeyboardInterrupt, so no
    ``except Exception`` on the way swallows it)."""

    def __init__(self, signum: int, what: str = "nothing was written"):
        self.signum = signum
        super().__init__(f"stopped by {name(signum)}; {what}")


class StopRequests:
    """The process's stop requests: which signals arrived (the first one names the stop), and the handlers that
    were installed before ours (a launcher's, e.g. submitit's), to hand the signals on after a checkpoint."""

    def __init__(self):
        self.signum: int | None = None
        self.received: list[int] = []
        self.previous: dict[int, Any] = {}
        self.immediate = False  # raise Stopped from the handler (commands that hold no run)
        self.running = False  # a run holds its directory: the request waits for a checkpoint
        self.depth = 0

    @contextlib.contextmanager
    def listening(self, immediate: bool = False, restore: bool = True):
        """Handle the stop signals inside the block (nested blocks share the outer one's handlers and requests).
        Handlers can only be installed from the main thread; elsewhere none are and requests never arrive.
        ``restore=False`` (the ``jaxrl`` process itself) keeps them, recording only, until the interpreter exits:
        a signal while it shuts down is no traceback either."""
        outermost = self.depth == 0
        if outermost:
            self.signum, self.received, self.immediate, self.running = None, [], immediate, False
            if threading.current_thread() is threading.main_thread():
                self.previous = {signum: signal.signal(signum, self._handle) for signum in STOP_SIGNALS}
        self.depth += 1
        try:
            yield self
        finally:
            self.depth -= 1
            if outermost:
                self.immediate = False
                if restore:
                    for signum, handler in self.previous.items():
                        signal.signal(signum, handler)
                    self.previous = {}

    def _handle(self, signum, frame):
        first = self.signum is None
        self.signum = self.signum or signum
        if signum not in self.received:
            self.received.append(signum)
        if self.immediate and first:  # once: a second signal must not interrupt the first one's one line
            raise Stopped(signum)
        if not first:
            what = "already stopping; waiting for the checkpoint" if self.running else "already stopping"
        elif self.running:
            what = "stopping after this chunk's checkpoint"
        else:
            what = "stopping before the run writes anything"
        try:
            os.write(2, f"jaxrl: {name(signum)} received: {what}\n".encode())
        except OSError:  # SIGHUP: the terminal that stderr wrote to may be gone
            pass

    def check(self) -> None:
        """Raise ``Stopped`` if a stop was requested (called where stopping leaves nothing behind)."""
        if self.signum is not None:
            raise Stopped(self.signum)

    @contextlib.contextmanager
    def run_holds_its_directory(self):
        """From here on a request waits for a checkpoint at the next chunk boundary."""
        self.running = True
        try:
            yield
        finally:
            self.running = False

    def forward(self) -> None:
        """After the checkpoint: hand every signal received to the handler that was there before, so a launcher's
        own preemption logic runs too (SLURM preempts with SIGTERM, which submitit only logs, then SIGUSR2, on
        which submitit requeues the job and exits)."""
        for signum in self.received:
            handler = self.previous.get(signum)
            if callable(handler) and handler not in (signal.default_int_handler,):
                handler(signum, None)


# Signals are process-wide, so their requests are too: ``jaxrl``'s main and ``experiments.train.train`` share this.
REQUESTS = StopRequests()
