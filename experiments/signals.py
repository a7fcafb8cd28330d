"""Stop signals: every signal that asks a process to end becomes a request that the command honours cleanly.

A closed terminal (SIGHUP), Ctrl-C (SIGINT), Ctrl-\\ (SIGQUIT), a scheduler's warning (SIGTERM; SLURM's
``--signal`` and submitit's SIGUSR1 / SIGUSR2) all mean "stop": none may lose a run or print a traceback.

Python runs a signal's handler in the main thread, between two bytecodes. That is how Ctrl-C went wrong: a
``KeyboardInterrupt`` (or any exception a handler raises) raised inside JAX's garbage-collection callback or an
asyncio callback (orbax's checkpoint read) is printed and *ignored*, which trained a run to its end, made
``export --onnx`` wait forever for a future the callback never set, and let ``export`` print its success line
before the stop; raised inside XLA's compiler it is a 40-line traceback. And while the main thread waits in C++ (a
training chunk, a compile) no handler runs at all. So ``jaxrl`` replaces the handlers of every stop signal as the
first thing its ``main`` does, with one that only records the request and never raises, and it also has the
signal handed to a thread of its own at once (``signal.set_wakeup_fd``: the interpreter's C-level handler writes
the signal's number to a pipe that thread reads), which acts wherever the main thread is:

* the short commands (``export``, ``video``, ``plot``, ``info``, ...): the first signal ends the process at once,
  with one line and exit 128 + N, after removing the temporary file of a write it cut short (``export``,
  ``plot`` and ``video`` write each file to a temporary name and rename it, so none is ever half-written under its
  own name; ``on_stop``). A command prints its result through ``result``, which a stop that came first turns into
  the stop's line.
* ``train`` (and each run of ``sweep`` / ``reproduce``): before the run writes its first file, a request ends the
  command with nothing written (``Stopped``); once the run holds its directory, at the next chunk boundary after a
  checkpoint of the whole state (``experiments.train.Interrupted``): up to one chunk (the env steps between two
  evaluations) later. Either way: one line, exit 128 + N. Another stop signal meanwhile ends the process at once,
  saying which checkpoint is intact and how to resume; one during a checkpoint's write ends it the moment the
  write is complete (the manifest makes a checkpoint whole, and ``keep_checkpoints = 1`` deletes the older one
  before it: cutting the write could leave none). SIGUSR1 / SIGUSR2 never cut a run short: they are a scheduler's
  warnings, and SLURM's preemption sends SIGTERM and then SIGUSR2, on which submitit requeues the job after the
  checkpoint.

The window before ``main`` runs (the interpreter starting, ~50 ms) keeps Python's default: a SIGINT there is a
``KeyboardInterrupt`` before anything is written.
"""
from __future__ import annotations

import contextlib
import glob
import os
import shutil
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

# SIGTERM: SLURM, Kubernetes, `kill`; SIGINT: Ctrl-C; SIGHUP: the terminal or SSH session closed; SIGQUIT: Ctrl-\;
# SIGUSR1 / SIGUSR2: a scheduler's warning before a time limit (SLURM --signal, submitit).
STOP_SIGNALS = tuple(getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP", "SIGQUIT", "SIGUSR1",
                                                        "SIGUSR2") if hasattr(signal, name))
# A scheduler's warnings ask for a checkpoint (and then a requeue), never for the end of the process.
WARNINGS = tuple(getattr(signal, name) for name in ("SIGUSR1", "SIGUSR2") if hasattr(signal, name))


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
        self.immediate = False  # the first signal ends the process (commands that hold no run)
        self.running = False  # a run holds its directory: the request waits for a checkpoint
        self.depth = 0
        self.rerun = ""  # what continues a command of several runs after a stop (a sweep, a reproduction)
        self.run_dir: str | None = None  # the run that holds its directory, and its newest complete checkpoint
        self.checkpoint_step: int | None = None
        self._arrivals = 0
        self._saving = False
        self._deferred: int | None = None  # a signal that ends the process once the checkpoint's write is done
        self._finished = False  # the command has answered: a signal now changes nothing
        self._cleanups: list[Callable[[], None]] = []
        # Reentrant: the fallback handler runs in the main thread, which may hold it (printing a result).
        self._lock = threading.RLock()
        self._pipe: tuple[int, int] | None = None
        self._watcher: threading.Thread | None = None
        self._previous_wakeup = -1

    @contextlib.contextmanager
    def listening(self, immediate: bool = False, restore: bool = True):
        """Handle the stop signals inside the block (nested blocks share the outer one's handlers and requests).
        Handlers can only be installed from the main thread; elsewhere none are and requests never arrive.
        ``restore=False`` (the ``jaxrl`` process itself) keeps them, recording only, until the interpreter exits:
        a signal while it shuts down is no traceback either."""
        outermost = self.depth == 0
        if outermost:
            self.signum, self.received, self.immediate, self.running = None, [], immediate, False
            self.rerun, self.run_dir, self.checkpoint_step = "", None, None
            self._arrivals, self._saving, self._deferred, self._finished, self._cleanups = 0, False, None, False, []
            if threading.current_thread() is threading.main_thread():
                self.previous = {signum: signal.signal(signum, self._handle) for signum in STOP_SIGNALS}
                self._start_watcher()
        self.depth += 1
        try:
            yield self
        finally:
            self.depth -= 1
            if outermost:
                self.immediate = False
                if restore:
                    self._stop_watcher()
                    for signum, handler in self.previous.items():
                        signal.signal(signum, handler)
                    self.previous = {}

    # ------------------------------------------------------------------------------------- receiving signals

    def _start_watcher(self) -> None:
        read, write = os.pipe()
        os.set_blocking(write, False)  # the C-level handler must never block on a full pipe
        try:
            self._previous_wakeup = signal.set_wakeup_fd(write, warn_on_full_buffer=False)
        except (ValueError, OSError):  # no wakeup fd here: the handler does all the work, between bytecodes
            os.close(read)
            os.close(write)
            return
        self._pipe = (read, write)
        self._watcher = threading.Thread(target=self._watch, args=(read,), name="jaxrl-stop-signals", daemon=True)
        self._watcher.start()

    def _stop_watcher(self) -> None:
        if self._pipe is None:
            return
        read, write = self._pipe
        signal.set_wakeup_fd(self._previous_wakeup)  # before the close: the C handler must not write to a closed fd
        self._pipe, self._watcher = None, None
        os.close(write)  # the watcher reads end-of-file, closes its end and returns

    def _watch(self, read: int) -> None:
        try:
            while data := os.read(read, 64):
                for signum in data:
                    if self._previous_wakeup >= 0:  # the fd we replaced (an event loop's) learns of it too
                        with contextlib.suppress(OSError):
                            os.write(self._previous_wakeup, bytes([signum]))
                    if signum in STOP_SIGNALS and signal.getsignal(signum) == self._handle:
                        self._arrived(signum)
        finally:
            os.close(read)

    def _watched(self) -> bool:
        """Whether this signal reached the watcher: it runs, and the wakeup fd is still ours (a library may have
        replaced it; a forked child has no watcher thread)."""
        if self._pipe is None or self._watcher is None or not self._watcher.is_alive():
            return False
        current = signal.set_wakeup_fd(self._pipe[1], warn_on_full_buffer=False)
        if current != self._pipe[1]:
            signal.set_wakeup_fd(current)
            return False
        return True

    def _handle(self, signum, frame):
        """Python's handler, in the main thread between two bytecodes: it records the request (the main thread sees
        it at once, before the watcher thread may have run) and raises nothing; the watcher acts on it."""
        if self._watched():
            self._record(signum)
        else:
            self._arrived(signum)

    def _record(self, signum: int) -> None:
        if self.signum is None:
            self.signum = signum
        if signum not in self.received:
            self.received.append(signum)

    def _arrived(self, signum: int) -> None:
        """One signal, in the watcher thread (or in the handler where there is no watcher)."""
        # A main thread stuck holding the lock (printing into a full pipe) must not keep a short command alive.
        locked = self._lock.acquire(timeout=2.0)
        try:
            if self._finished:
                return
            self._record(signum)
            self._arrivals += 1
            if self.immediate:
                self._end(self.signum, self._short_line())
            if self._arrivals > 1 and signum not in WARNINGS:
                if self._saving:
                    self._deferred = signum
                    _say(f"{name(signum)} received again: ending the moment the checkpoint being written is "
                         "complete")
                    return
                self._end(signum, self._cut_short(signum))
            if self._arrivals > 1:
                what = "already stopping; waiting for the checkpoint" if self.running else "already stopping"
            elif self.running:
                what = "stopping after this chunk's checkpoint (another stop signal ends the process at once)"
            else:
                what = "stopping before the run writes anything"
            _say(f"{name(signum)} received: {what}")
        finally:
            if locked:
                self._lock.release()

    def _short_line(self) -> str:
        return f"stopped by {name(self.signum)} before the command finished; no file is left half-written"

    def _cut_short(self, signum: int) -> str:
        """The one line of a process that a second stop signal ends."""
        if not self.running:
            return (f"stopped by {name(signum)} before its next run wrote anything; rerun {self.rerun}" if self.rerun
                    else f"stopped by {name(signum)}; nothing was written")
        run_dir = self.run_dir
        directory = os.path.join(run_dir, "checkpoints")
        head = f"stopped at once by {name(signum)} (a second stop signal)"
        resume = f"continue with: jaxrl train --resume {run_dir}" + (f" (or rerun {self.rerun})" if self.rerun else "")
        if self.checkpoint_step is not None:
            return (f"{head}; the last checkpoint, at env step {self.checkpoint_step} in {directory}, is intact; "
                    f"{resume}")
        if os.path.isdir(directory) and any(entry.isdigit() for entry in os.listdir(directory)):
            return f"{head} while the run was restored; its checkpoints are as they were; {resume}"
        again = f"rerun {self.rerun}" if self.rerun else "start it again with --overwrite"
        return f"{head} before the run's first checkpoint: {run_dir} holds none to resume; {again}"

    def _end(self, signum: int, line: str) -> None:
        """The process ends here, with one line and 128 + N. Whatever the main thread prints meanwhile (it goes on
        while this thread cleans up) goes nowhere: no result, no traceback after the line."""
        if self.running and sys.stdout is not None and sys.stdout.isatty():  # a progress bar hid the cursor
            with contextlib.suppress(OSError):
                os.write(1, b"\x1b[?25h\n")
        _say(line)
        with contextlib.suppress(OSError):
            silent = os.open(os.devnull, os.O_WRONLY)
            os.dup2(silent, 1)
            os.dup2(silent, 2)
        for cleanup in reversed(list(self._cleanups)):
            with contextlib.suppress(BaseException):
                cleanup()
        os._exit(128 + signum)

    # ------------------------------------------------------------------------------------- what commands call

    def check(self) -> None:
        """Raise ``Stopped`` if a stop was requested (called where stopping leaves nothing behind)."""
        if self.signum is not None:
            raise Stopped(self.signum)

    def result(self, text: str, last: bool = True) -> None:
        """Print a command's result (stdout), unless a stop came first: a short command then ends with the stop's
        line instead (a command never prints success after a stop). After the ``last`` one, signals change nothing:
        the command has answered."""
        with self._lock:
            if self.immediate and self.signum is not None:
                self._end(self.signum, self._short_line())
            print(text, flush=True)
            if last:
                self._finished = True

    def last_line(self, text: str) -> None:
        """The command's last line (stderr): a stop's, written after any "received" line of the watcher."""
        with self._lock:
            self._finished = True
            print(text, file=sys.stderr, flush=True)

    def finish(self) -> None:
        """The command has returned its exit code: a stop that arrived unacted on still ends a short command (its
        result was not printed); later signals change nothing."""
        with self._lock:
            if self.immediate and self.signum is not None:
                self._end(self.signum, self._short_line())
            self._finished = True

    @contextlib.contextmanager
    def on_stop(self, cleanup: Callable[[], None]):
        """Inside the block, a stop that ends the process at once first calls ``cleanup`` (to remove a partial
        output; best effort, the command's own thread may still be writing)."""
        self._cleanups.append(cleanup)
        try:
            yield
        finally:
            with self._lock:  # not while a stop is running the cleanups (that one never returns)
                self._cleanups.remove(cleanup)

    @contextlib.contextmanager
    def run_holds_its_directory(self, run_dir: str | None = None):
        """From here on a request waits for a checkpoint at the next chunk boundary; a second one names
        ``run_dir``'s newest complete checkpoint (``checkpoint_step``)."""
        self.running, self.run_dir, self.checkpoint_step = True, run_dir, None
        try:
            yield
        finally:
            self.running, self.run_dir, self.checkpoint_step = False, None, None

    @contextlib.contextmanager
    def writing_checkpoint(self):
        """Around a checkpoint's write (``jaxrl.checkpoint.save``): a signal that would end the process waits for
        its end. Orbax commits by renaming its temporary directory and ``save`` then writes the manifest that makes
        the step whole, so a kill in between leaves a step that ``restore`` sets aside as damaged, and with
        ``keep_checkpoints = 1`` orbax has already deleted the older one: there would be no intact checkpoint."""
        with self._lock:
            self._saving = True
        try:
            yield
        finally:
            with self._lock:
                self._saving, deferred = False, self._deferred
                if deferred is not None:
                    self._end(deferred, self._cut_short(deferred))

    def forward(self) -> None:
        """After the checkpoint: hand every signal received to the handler that was there before, so a launcher's
        own preemption logic runs too (SLURM preempts with SIGTERM, which submitit only logs, then SIGUSR2, on
        which submitit requeues the job and exits)."""
        for signum in self.received:
            handler = self.previous.get(signum)
            if callable(handler) and handler not in (signal.default_int_handler,):
                handler(signum, None)


def _say(text: str) -> None:
    """One line on stderr, unbuffered (it may come from the watcher thread while the main thread prints)."""
    try:
        os.write(2, f"jaxrl: {text}\n".encode())
    except OSError:  # SIGHUP: the terminal that stderr wrote to may be gone
        pass


def temporaries(path: str) -> Callable[[], None]:
    """A cleanup for ``on_stop``: this process's temporary files of ``path`` (``jaxrl.files`` and ``write_mp4``
    write ``<path>.tmp<pid>...`` and rename it), and the directories that writing ``path`` creates, if left
    empty."""
    path = os.path.abspath(path)
    created, parent = [], os.path.dirname(path)
    while not os.path.exists(parent):
        created.append(parent)
        parent = os.path.dirname(parent)

    def remove():
        for leftover in glob.glob(f"{glob.escape(path)}.tmp{os.getpid()}*"):
            shutil.rmtree(leftover) if os.path.isdir(leftover) else os.unlink(leftover)
        for directory in created:
            with contextlib.suppress(OSError):
                os.rmdir(directory)  # only if empty
    return remove


def temporaries_in(directory: str) -> Callable[[], None]:
    """A cleanup for ``on_stop``: this process's temporary files directly in ``directory`` (a run's atomic writes,
    its videos)."""
    def remove():
        for leftover in glob.glob(os.path.join(glob.escape(directory), f"*.tmp{os.getpid()}*")):
            os.unlink(leftover)
    return remove


# Signals are process-wide, so their requests are too: ``jaxrl``'s main and ``experiments.train.train`` share this.
REQUESTS = StopRequests()
