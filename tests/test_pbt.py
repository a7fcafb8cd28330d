"""Population-based training: selection and perturbation on hand-made fitness vectors, the [pbt] table's checks."""
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents import sac
from jaxrl import ConfigError, pbt
from jaxrl.loop import stack_configs
from tests.helpers import assert_restored_checkpoint_continues_bitwise

KEY = jax.random.PRNGKey(3)
FITNESS = jnp.array([3.0, 1.0, 4.0, 1.0, 5.0, 9.0, 2.0, 6.0])


def test_the_worst_copy_the_best_in_rank_order_ties_by_index_and_nan_lowest():
    # ranked worst first: 1 (member 1), 1 (3), 2 (6), 3 (0), 4 (2), 5 (4), 6 (7), 9 (5)
    np.testing.assert_array_equal(pbt.select_parents(FITNESS, 2, 2), [0, 5, 2, 7, 4, 5, 6, 7])
    # a smaller top than bottom cycles through it: the 4 worst (1, 3, 6, 0) copy 5, 7, 5, 7
    np.testing.assert_array_equal(pbt.select_parents(FITNESS, 4, 2), [7, 5, 2, 7, 4, 5, 5, 7])
    # a member not evaluated yet (NaN) ranks below every number
    np.testing.assert_array_equal(pbt.select_parents(FITNESS.at[5].set(jnp.nan), 1, 1), [0, 1, 2, 3, 4, 7, 6, 7])


def test_perturbation_moves_only_copying_members_by_a_drawn_factor_within_bounds():
    values = jnp.array([1e-3, 2e-3, 4e-3, 8e-3])
    copied = jnp.array([False, True, True, False])
    doubled = pbt.explore_values(values, copied, KEY, pbt.Explore("actor_lr", perturb=(2.0,), bounds=(0.0, 6e-3)))
    np.testing.assert_allclose(doubled, [1e-3, 4e-3, 6e-3, 8e-3], rtol=1e-6)  # 8e-3 > 6e-3 but it does not copy
    many = jnp.full(1000, 1.0)
    moved = pbt.explore_values(many, jnp.ones(1000, bool), KEY, pbt.Explore("tau", perturb=(0.8, 1.25)))
    np.testing.assert_allclose(np.unique(np.asarray(moved)), [0.8, 1.25], rtol=1e-6)
    drawn = pbt.explore_values(many, jnp.ones(1000, bool), KEY,
                               pbt.Explore("tau", resample=("log_uniform", 1e-3, 1e-1)))
    assert 1e-3 <= float(drawn.min()) < 2e-3 and 0.05 < float(drawn.max()) <= 1e-1
    assert np.mean(np.asarray(drawn) < 1e-2) == pytest.approx(0.5, abs=0.06)  # log-uniform: half below the middle


def test_exploit_and_explore_gives_copies_their_parents_values_and_moves_the_explored_ones():
    configs = [sac.Config(actor_lr=1e-4 * (k + 1), tau=0.001 * (k + 1)) for k in range(8)]
    hparams = stack_configs(configs, configs[0])
    cfg = pbt.PBTConfig(interval=1000, explore=(pbt.Explore("actor_lr", perturb=(1.25,)),))
    parents, new = pbt.exploit_and_explore(hparams, FITNESS, jax.random.split(KEY, 8), cfg)
    np.testing.assert_array_equal(parents, [0, 5, 2, 7, 4, 5, 6, 7])
    expected_lr = np.array([1e-4 * (p + 1) for p in [0, 5, 2, 7, 4, 5, 6, 7]])
    expected_lr[[1, 3]] *= 1.25
    np.testing.assert_allclose(new.actor_lr, expected_lr, rtol=1e-6)
    np.testing.assert_allclose(new.tau, [0.001 * (p + 1) for p in [0, 5, 2, 7, 4, 5, 6, 7]], rtol=1e-6)
    np.testing.assert_array_equal(new.critic_lr, hparams.critic_lr)


GOOD = {"interval": 2000, "explore": {"actor_lr": {"perturb": [0.8, 1.25], "bounds": [1e-5, 1e-2]}}}


@pytest.mark.parametrize("table, fragment", [
    ({**GOOD, "bottm": 0.2}, "unknown key(s) bottm"),
    ({"explore": GOOD["explore"]}, "needs interval"),
    ({**GOOD, "top": 1.5}, "top = 1.5 must be a fraction in (0, 1)"),
    ({**GOOD, "explore": {"actor_lr": {"perturb": []}}}, "perturb needs a non-empty list of factors > 0"),
    ({**GOOD, "explore": {"actor_lr": {"perturb": [2.0], "resample": {"uniform": [0, 1]}}}}, "expected {perturb"),
    ({**GOOD, "explore": {"tau": {"resample": {"log_uniform": [0, 1]}}}}, "low < high and low > 0"),
    ({**GOOD, "explore": {"tau": {"perturb": [2.0], "bounds": [1, 0]}}}, "bounds needs [low, high]"),
])
def test_a_bad_pbt_table_is_one_line(table, fragment):
    with pytest.raises(ConfigError, match=None) as error:
        pbt.parse(table)
    assert fragment in str(error.value) and "\n" not in str(error.value)


@pytest.mark.parametrize("population, changes, fragment", [
    (3, {}, "give 0 copying and 0 copied members"),
    (8, {"bottom": 0.75, "top": 0.5}, "together <= 8"),
    (8, {"interval": 1500}, "interval = 1500 must be a positive multiple of the program's chunk of 1000"),
    (8, {"explore": (pbt.Explore("hidden_sizes", perturb=(2.0,)),)}, "hidden_sizes: not a numeric (traced) field"),
])
def test_a_pbt_table_that_does_not_fit_its_program_is_one_line(population, changes, fragment):
    cfg = pbt.parse(GOOD)
    cfg = pbt.PBTConfig(**{**cfg.__dict__, **changes})
    traced = {"actor_lr": 3e-4, "critic_lr": 3e-4, "tau": 0.005}
    with pytest.raises(ConfigError) as error:
        pbt.check(cfg, population, 1000, traced)
    assert fragment in str(error.value) and "\n" not in str(error.value)


def test_in_the_program_the_worst_member_becomes_a_bitwise_copy_of_the_best_and_a_resume_is_exact(tmp_path):
    """Four SAC members on toy/Pendulum, PBT after every chunk: right after the first, the worst member's agent
    (networks, optimiser states, targets) and observation statistics are its parent's bit for bit, its replay
    buffer its own (copy_buffer off, the default) and its parent's with copy_buffer; its actor_lr is the parent's
    doubled, its other fields the parent's; its RNG and envs are its own. A checkpoint restored after that chunk
    continues exactly as the unsaved state."""
    import envs
    from jaxrl.loop import LoopConfig, make_train

    loop = LoopConfig(steps=400, num_envs=2, num_eval_envs=2, eval_every=200, learning_starts=100, buffer_size=1000)
    cfg = sac.Config(hidden_sizes=(16,), batch_size=16)
    population = pbt.PBTConfig(interval=200, explore=(pbt.Explore("actor_lr", perturb=(2.0,)),),
                               copy_buffer=False)
    trainer = make_train(sac.AGENT, envs.make("toy/Pendulum", 2), envs.make("toy/Pendulum", 2), loop, cfg,
                         pbt=population)
    configs = [cfg.replace(actor_lr=1e-4 * (k + 1), tau=0.001 * (k + 1)) for k in range(4)]
    state, metrics = trainer.run_chunk(trainer.init_members([0, 1, 2, 3], configs))
    metrics = jax.device_get(metrics)
    worst, best = int(np.argmin(metrics["eval/return"])), int(np.argmax(metrics["eval/return"]))
    expected = np.arange(4)
    expected[worst] = best
    np.testing.assert_array_equal(metrics["pbt/parent"], expected)
    np.testing.assert_array_equal(metrics["pbt/fitness"], metrics["eval/return"])
    def same_rows(tree, a, b):
        return all(np.array_equal(x[a], x[b]) for x in jax.tree.leaves(tree) if np.ndim(x))

    assert same_rows(state.agent, worst, best) and same_rows(state.normalizers, worst, best)
    assert not same_rows(state.buffer, worst, best)  # its own transitions
    # The same step with copy_buffer (the program's function on this state, without compiling a second program).
    before = jax.tree.map(np.copy, jax.device_get(state))
    copied, _ = pbt.step(dataclasses.replace(population, copy_buffer=True), before, metrics["eval/return"],
                         jnp.bool_(True))
    assert same_rows(copied.buffer, worst, best) and same_rows(copied.agent, worst, best)
    assert float(state.hparams.actor_lr[worst]) == pytest.approx(2 * 1e-4 * (best + 1), rel=1e-6)
    assert float(state.hparams.tau[worst]) == pytest.approx(0.001 * (best + 1), rel=1e-6)
    assert not np.array_equal(state.key[worst], state.key[best])
    np.testing.assert_allclose(metrics["hparams/actor_lr"], state.hparams.actor_lr)

    assert_restored_checkpoint_continues_bitwise(trainer, state, tmp_path)
