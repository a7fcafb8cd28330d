"""The C51 projection's two forms (jaxrl/distributional.py): the CPU's scatter-add and the other backends' dense
expression are the same sum (the hand-computed cases are in test_simbav2.py and test_fast_agents.py, and run the
CPU form here)."""
import jax
import jax.numpy as jnp
import numpy as np

from jaxrl.distributional import _dense_projection, categorical_projection

SUPPORT = jnp.linspace(-10.0, 200.0, 101)  # FastSAC's CPU recipe's support


def atoms_and_probs(batch=256, critics=2):
    key_atoms, key_probs = jax.random.split(jax.random.PRNGKey(7))
    # r + gamma z_k, with rows exactly on the bins, below and above the support, and on its top edge
    atoms = jax.random.normal(key_atoms, (batch, 1)) * 5.0 + 0.97 * SUPPORT[None]
    atoms = atoms.at[0].set(SUPPORT).at[1].set(SUPPORT - 500.0).at[2].set(SUPPORT + 500.0).at[3, -1].set(200.0)
    probs = jax.nn.softmax(jax.random.normal(key_probs, (critics, batch, 101)), axis=-1)
    return atoms, probs


def test_the_cpu_projection_equals_the_dense_form_to_rounding():
    atoms, probs = atoms_and_probs()
    dense = np.asarray(_dense_projection(atoms, probs, SUPPORT))
    np.testing.assert_allclose(categorical_projection(atoms, probs, SUPPORT), dense, rtol=0, atol=1e-6)
    np.testing.assert_allclose(jax.jit(categorical_projection)(atoms, probs, SUPPORT), dense, rtol=0, atol=1e-6)
    np.testing.assert_allclose(np.asarray(categorical_projection(atoms, probs, SUPPORT)).sum(-1), 1.0, atol=1e-5)
    # More axes of atoms (rows of rows), and under vmap as the loop runs it (seeds)
    nested_atoms, nested_probs = atoms.reshape(4, 64, 101), probs.reshape(2, 4, 64, 101)
    np.testing.assert_allclose(categorical_projection(nested_atoms, nested_probs, SUPPORT),
                               dense.reshape(2, 4, 64, 101), rtol=0, atol=1e-6)
    per_seed = jax.vmap(categorical_projection, in_axes=(0, 1, None), out_axes=1)(nested_atoms, nested_probs,
                                                                                 SUPPORT)
    np.testing.assert_allclose(per_seed, dense.reshape(2, 4, 64, 101), rtol=0, atol=1e-6)


def test_a_nan_atom_makes_its_rows_projection_nan_for_the_loss_check():
    atoms, probs = atoms_and_probs(batch=8)
    atoms = atoms.at[5, 40].set(jnp.nan)  # a NaN reward or log-prob: the run must stop, not drop the atom
    for form in (categorical_projection, _dense_projection):
        has_nan = np.isnan(np.asarray(form(atoms, probs, SUPPORT))).any(axis=-1)
        assert has_nan[:, 5].all() and not has_nan[:, :5].any() and not has_nan[:, 6:].any(), form.__name__


def test_the_cpu_program_never_builds_a_batch_by_atoms_by_bins_array():
    """The dense form's [B, K, M] weights (42 MB at B = 1024, K = M = 101) made the projection over half of FastSAC's
    and FastTD3's CPU update; the scatter form needs the output and [B, K] shares only."""
    atoms, probs = jnp.zeros((1024, 101)), jnp.zeros((2, 1024, 101))
    compiled = jax.jit(categorical_projection).lower(atoms, probs, SUPPORT).compile()
    assert compiled.memory_analysis().temp_size_in_bytes < 1024 * 101 * 101 * 4 // 4
