"""Where a sweep's programs run: here (``local``), on SLURM through submitit, or on a Ray cluster.

Each job is one vmapped program, given as the explicit list of its member ids (``sweep.run_program``): it reads
their definitions from the ``OUT/plan.json`` the driver wrote (a job never re-plans the sweep file, so it runs
exactly the members it was given, whenever it starts), trains the program in ``OUT/groups/<env>-<hash>``
(starting it, resuming it from its checkpoint, or reusing it if it finished), and writes its members'
``OUT/members/<id>/``. The output directory must be on a file system the workers share. The results table is
collected from those files afterwards (``sweep.collect``), whatever ran them; a job that died can be rerun (rerun
the sweep) and resumes from its checkpoint.

SLURM jobs are requeued on preemption and time-outs: the job function (``ProgramJob``) is checkpointable for
submitit. On the warning signal (SIGUSR2, which submitit asks SLURM to send ``slurm_signal_delay_s`` seconds
before the time limit, 90 by default, and which a preemption sends), ``experiments.train.train`` finishes the
chunk, writes a checkpoint and hands the signal to submitit's handler, which calls ``ProgramJob.checkpoint`` and
requeues the job; the requeued job runs the same members again and continues from that checkpoint (a chunk must
take well under the signal delay).

Options (``jaxrl sweep FILE --launcher slurm --launcher-option partition=gpu --launcher-option gpus_per_node=1``):
  slurm: any ``submitit`` parameter (partition, timeout_min, gpus_per_node, cpus_per_task, mem_gb, ...), and
         ``cluster=local`` to run the same jobs as local subprocesses (submitit's LocalExecutor, for testing);
  ray:   ``address`` (default: start a local Ray instance), ``num_cpus`` / ``num_gpus`` per job.
"""
from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

from jaxrl import ConfigError

LAUNCHERS = ("local", "slurm", "ray")


# What a launcher runs: ``work(out_dir, member_ids, quiet=...)`` trains one program (``sweep.run_program``). It is
# a module-level function, so submitit and Ray pickle it by name.
Work = Callable[..., list[str]]


class ProgramJob:
    """One sweep program as a job: ``ProgramJob(work)(out_dir, member_ids)`` runs ``work`` on it.

    Checkpointable for submitit: on preemption or a time-out submitit calls ``checkpoint`` with the job's
    arguments and requeues what it returns, the same call. The training state itself is in the program's
    checkpoint (written by ``train`` before it hands the signal on), so the requeued call resumes from it."""

    def __init__(self, work: Work):
        self.work = work

    def __call__(self, out_dir: str, member_ids: list[str], quiet: bool = True) -> list[str]:
        return self.work(out_dir, list(member_ids), quiet=quiet)

    def checkpoint(self, *args: Any, **kwargs: Any):
        from submitit.helpers import DelayedSubmission

        return DelayedSubmission(self, *args, **kwargs)


def _run_job(job: ProgramJob, out_dir: str, member_ids: list[str]) -> list[str]:
    return job(out_dir, member_ids)


def parse_options(items: list[str]) -> dict[str, Any]:
    """["partition=gpu", "timeout_min=60"] -> {"partition": "gpu", "timeout_min": 60} (numbers parsed)."""
    options = {}
    for item in items:
        name, sep, value = item.partition("=")
        if not sep or not name:
            raise ConfigError(f"--launcher-option {item!r}: expected NAME=VALUE")
        for cast in (int, float):
            try:
                value = cast(value)
                break
            except ValueError:
                pass
        options[name] = value
    return options


def launch(work: Work, launcher: str, out_dir: str, programs: list[list[str]], options: dict[str, Any],
           quiet: bool = False) -> None:
    """Run ``work`` on each program (a list of member ids planned into ``out_dir/plan.json``) with ``launcher``."""
    if launcher not in LAUNCHERS:
        raise ConfigError(f"launcher {launcher!r} is not one of: {', '.join(LAUNCHERS)}")
    if not programs:
        return
    if launcher == "local":
        for member_ids in programs:
            ProgramJob(work)(out_dir, member_ids, quiet=quiet)
    elif launcher == "slurm":
        for job in submit_slurm(work, out_dir, programs, dict(options)):
            job.result()  # re-raises a job's exception here, with its log path
    else:
        _ray(work, out_dir, programs, dict(options))


def submit_slurm(work: Work, out_dir: str, programs: list[list[str]], options: dict[str, Any]) -> list:
    """Submit one job per program (an array job on SLURM); returns submitit's job objects."""
    try:
        import submitit
    except ImportError:
        raise ConfigError("the slurm launcher needs submitit: pip install -e '.[launch]'") from None
    options = dict(options)
    cluster = options.pop("cluster", None)
    executor = submitit.AutoExecutor(folder=os.path.join(out_dir, "slurm", "%j"), cluster=cluster)
    executor.update_parameters(**{"timeout_min": 24 * 60, "name": "jaxrl-sweep", **options})
    return executor.map_array(ProgramJob(work), [out_dir] * len(programs), programs)


def _ray(work: Work, out_dir: str, programs: list[list[str]], options: dict[str, Any]) -> None:
    try:
        import ray
    except ImportError:
        raise ConfigError("the ray launcher needs ray: pip install -e '.[launch]'") from None
    address = options.pop("address", None)
    started = not ray.is_initialized()
    if started:
        # The workers import this project from the same checkout: share its root on their path.
        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        ray.init(address=address, include_dashboard=False, log_to_driver=False,
                 runtime_env={"env_vars": {"PYTHONPATH": root}})
    try:
        remote = ray.remote(num_cpus=options.pop("num_cpus", 1), num_gpus=options.pop("num_gpus", 0),
                            max_retries=0)(_run_job)
        ray.get([remote.remote(ProgramJob(work), out_dir, member_ids) for member_ids in programs])
    finally:
        if started:
            ray.shutdown()
