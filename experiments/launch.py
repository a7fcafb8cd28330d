"""Where a sweep's programs run: here (``local``), on SLURM through submitit, or on a Ray cluster.

Each job is one vmapped program (``sweep.run_group``): it trains, writes its run directory and its members'
rows under the sweep's output directory, which must be on a file system the workers share. The results table
is collected from those files afterwards (``sweep.collect``), whatever ran them; a job that died can be rerun
and resumes from its checkpoints.

Options (``jaxrl sweep FILE --launcher slurm --launcher-option partition=gpu --launcher-option gpus_per_node=1``):
  slurm: any ``submitit`` parameter (partition, timeout_min, gpus_per_node, cpus_per_task, mem_gb, ...), and
         ``cluster=local`` to run the same jobs as local subprocesses (submitit's LocalExecutor, for testing);
  ray:   ``address`` (default: start a local Ray instance), ``num_cpus`` / ``num_gpus`` per job.
"""
from __future__ import annotations

import os
from typing import Any

from jaxrl import ConfigError

LAUNCHERS = ("local", "slurm", "ray")


def _run_group(sweep_file: str, out_dir: str, index: int) -> list[dict[str, Any]]:
    from experiments.sweep import run_group

    return run_group(sweep_file, out_dir, index)


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


def launch(launcher: str, sweep_file: str, out_dir: str, groups: list[int], options: dict[str, Any],
           quiet: bool = False) -> None:
    if launcher not in LAUNCHERS:
        raise ConfigError(f"launcher {launcher!r} is not one of: {', '.join(LAUNCHERS)}")
    if launcher == "local":
        from experiments.sweep import run_group

        for index in groups:
            run_group(sweep_file, out_dir, index, quiet=quiet)
    elif launcher == "slurm":
        _slurm(sweep_file, out_dir, groups, dict(options))
    else:
        _ray(sweep_file, out_dir, groups, dict(options))


def _slurm(sweep_file: str, out_dir: str, groups: list[int], options: dict[str, Any]) -> None:
    try:
        import submitit
    except ImportError:
        raise ConfigError("the slurm launcher needs submitit: pip install -e '.[launch]'") from None
    cluster = options.pop("cluster", None)
    executor = submitit.AutoExecutor(folder=os.path.join(out_dir, "slurm", "%j"), cluster=cluster)
    executor.update_parameters(**{"timeout_min": 24 * 60, "name": "jaxrl-sweep", **options})
    jobs = executor.map_array(_run_group, [sweep_file] * len(groups), [out_dir] * len(groups), groups)
    for job in jobs:
        job.result()  # re-raises a job's exception here, with its log path


def _ray(sweep_file: str, out_dir: str, groups: list[int], options: dict[str, Any]) -> None:
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
                            max_retries=0)(_run_group)
        ray.get([remote.remote(sweep_file, out_dir, index) for index in groups])
    finally:
        if started:
            ray.shutdown()
