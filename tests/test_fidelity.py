"""Details that match the official implementations (issue: a line-by-line comparison with the official code)."""
import math

import jax
import jax.numpy as jnp
import numpy as np

from agents import tdmpc2
from jaxrl.networks import ACTIVATIONS, MLP
from jaxrl.types import EnvSpec


def test_gelu_is_pytorchs_exact_erf_form():
    # DSAC-T's official networks use torch.nn.GELU(), x * Phi(x); Flax's default is the tanh approximation, which
    # differs by ~1.5e-4 at x = 1.
    x = jnp.linspace(-4.0, 4.0, 81)
    exact = 0.5 * x * (1.0 + jax.scipy.special.erf(x / math.sqrt(2.0)))
    np.testing.assert_allclose(ACTIVATIONS["gelu"](x), exact, atol=1e-6)
    assert abs(float(ACTIVATIONS["gelu"](jnp.float32(1.0))) - 0.8413447) < 1e-6


def test_layer_norm_follows_the_activation_as_in_brax():
    # brax.training.networks.MLP: Dense -> activation -> LayerNorm on every hidden layer. With an output layer
    # that averages the last hidden features, a LayerNorm last (zero mean, its scale and bias at init) gives 0 for
    # every input; a LayerNorm before the ReLU would leave non-negative features with a positive mean.
    mlp = MLP((8,), 1, "relu", layer_norm=True)
    x = jax.random.normal(jax.random.PRNGKey(0), (16, 3))
    params = mlp.init(jax.random.PRNGKey(1), x)
    params = jax.tree_util.tree_map_with_path(
        lambda path, p: jnp.full_like(p, 1 / 8) if "Dense_1" in jax.tree_util.keystr(path) and p.ndim == 2
        else (jnp.zeros_like(p) if "Dense_1" in jax.tree_util.keystr(path) else p), params)
    np.testing.assert_allclose(mlp.apply(params, x), 0.0, atol=1e-6)


def test_tdmpc2_weights_are_normal_with_std_002():
    # Official: nn.init.trunc_normal_(w, std=0.02) with its default absolute cut-offs +-2, i.e. an untruncated
    # N(0, 0.02^2) in effect. Flax's truncated_normal(0.02) cuts at 2 std, which gives an effective std ~0.0176.
    cfg = tdmpc2.Config(latent_dim=64, hidden_dim=512, encoder_dim=512, num_q=2)
    state = tdmpc2.init(jax.random.PRNGKey(0), EnvSpec(512, 2, 100, False), cfg)
    kernel = np.asarray(state.model_params["params"]["dynamics_net_1"]["Dense_0"]["kernel"])
    assert kernel.shape == (512, 512)
    assert abs(kernel.std() - 0.02) < 0.0003, kernel.std()
    assert np.mean(np.abs(kernel) > 0.04) > 0.03  # ~4.6 % of N(0, 0.02^2) lies beyond 2 std


def test_tdmpc2_plans_two_more_iterations_for_large_action_spaces():
    # tdmpc2/tdmpc2.py: cfg.iterations += 2 * int(cfg.action_dim >= 20) (humanoid, dog, Playground humanoids).
    cfg = tdmpc2.Config(iterations=6)
    assert tdmpc2.planner_config(cfg, action_size=19).iterations == 6
    assert tdmpc2.planner_config(cfg, action_size=20).iterations == 8
