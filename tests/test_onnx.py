"""ONNX export of the deterministic actor (``jaxrl export RUN_DIR --onnx``): onnxruntime's actions equal the jitted
policy's. Tolerance 1e-4: both run float32 and sum in different orders (3.6e-7 measured on a trained SAC actor,
1.8e-5 on DSAC-T's 256-wide actor with every weight moved by 0.3 N(0, 1))."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents import get_agent
from experiments.export import actor_to_onnx
from jaxrl.types import EnvSpec

pytest.importorskip("jax2onnx")  # the onnx extra; the test extra installs it

MEMORYLESS = ["sac", "td3", "tqc", "dsac_t", "simbav2", "fasttd3", "fastsac", "crossq"]


@pytest.mark.parametrize("name", MEMORYLESS)
def test_every_memoryless_actor_exports_and_onnxruntime_matches_it(name, tmp_path):
    import onnx

    agent = get_agent(name)
    spec = EnvSpec(obs_size=5, action_size=2, decisions_per_episode=100)
    cfg = agent.Config()
    key = jax.random.PRNGKey(0)
    state = agent.init(key, spec, cfg)
    # Zero-initialised heads (FastSAC) would make every action 0 and the comparison empty: move every parameter.
    leaves, treedef = jax.tree.flatten(state)
    keys = jax.random.split(jax.random.PRNGKey(1), len(leaves))
    state = treedef.unflatten([x + 0.1 * jax.random.normal(k, x.shape, x.dtype) if jnp.issubdtype(x.dtype, jnp.floating)
                               else x for x, k in zip(leaves, keys, strict=True)])

    def act(obs):
        return agent.act(state, obs, key, cfg, True, ())[0]

    path = str(tmp_path / "actor.onnx")
    check = actor_to_onnx(act, spec.obs_size, path, obs_mean=np.full(5, 2.0), obs_std=np.full(5, 0.5))
    assert check["max_abs_diff"] < 1e-4, check
    model = onnx.load(path)
    assert [i.name for i in model.graph.input] == ["obs"] and [o.name for o in model.graph.output] == ["action"]
    obs = jax.random.normal(jax.random.PRNGKey(2), (64, 5))
    actions = np.asarray(act(obs))
    assert actions.shape == (64, 2) and np.all(np.abs(actions) <= 1) and actions.std(axis=0).min() > 1e-2
