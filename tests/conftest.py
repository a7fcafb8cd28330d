import os

import jax
import pytest

# Compilation dominates test time on 2 cores: reuse compiled programs across runs (cache outside the checkout).
jax.config.update("jax_compilation_cache_dir", os.path.expanduser("~/.cache/jaxrl/xla-tests"))
jax.config.update("jax_persistent_cache_min_compile_time_secs", 0.5)


@pytest.fixture(scope="session")
def repo_root():
    return os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
