"""Environment construction: ``envs.make(name, num_envs, ...)`` and the names it knows (``envs.list_envs()``)."""
from envs.registry import RawEnv, list_envs, make, make_raw
from envs.wrappers import EnvState, Step, VecEnv

__all__ = ["EnvState", "RawEnv", "Step", "VecEnv", "list_envs", "make", "make_raw"]
