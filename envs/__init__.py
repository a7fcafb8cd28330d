"""Environment construction: ``envs.make(name, num_envs, ...)`` and the names it knows (``envs.list_envs()``)."""
from envs.raw import RawEnv
from envs.registry import (
    SUITE_LOOP_DEFAULTS,
    current_env_name,
    env_note,
    env_revision,
    list_envs,
    make,
    make_raw,
    not_comparable,
    physics_caveat,
    suite_loop_defaults,
)
from envs.wrappers import EnvState, Step, VecEnv

__all__ = ["SUITE_LOOP_DEFAULTS", "EnvState", "RawEnv", "Step", "VecEnv", "current_env_name", "env_note",
           "env_revision", "list_envs", "make", "make_raw",
           "not_comparable", "physics_caveat", "suite_loop_defaults"]
