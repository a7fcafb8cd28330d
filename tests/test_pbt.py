"""Population-based training: selection and perturbation on hand-made fitness vectors, the [pbt] table's checks."""
import csv
import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents import sac
from jaxrl import ConfigError, pbt
from jaxrl.loop import stack_configs
from tests.helpers import TINY_TABLES, assert_restored_checkpoint_continues_bitwise

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


@pytest.mark.parametrize("explore, fragment", [
    ({"gamma": {"perturb": [0.8, 1.25]}}, "gamma: perturbing member 0's 0.99 by [0.8, 1.25] reaches 1.2375, which "
     "the agent refuses (gamma must be"),
    ({"gamma": {"perturb": [0.8, 1.25], "bounds": [0.9, 1.5]}}, "gamma: bounds = [0.9, 1.5] reach 1.5"),
    ({"tau": {"resample": {"uniform": [0.5, 2.0]}}}, "tau: resample uniform = [0.5, 2.0] reaches 2"),
    ({"actor_lr": {"perturb": [0.5, 1.5]}, "tau": {"perturb": [0.9]}, "init_alpha": {"perturb": [3.0]},
      "gamma": {"perturb": [1.1]}}, "gamma: perturbing member 0's 0.99 by [1.1] reaches 1.089"),
])
def test_explore_that_would_leave_a_fields_domain_is_refused_in_one_line(explore, fragment):
    """γ = 0.99 x 1.25 would train a member at 1.2375 (and its exported winner could not be resumed): refused
    before anything compiles, through the agent's own check_config; bounds inside the domain, or factors that
    never leave it (an unbounded learning rate, a tau that only shrinks), are accepted."""
    configs = [sac.Config(), sac.Config(gamma=0.95, actor_lr=1e-3)]
    traced = {"actor_lr": 3e-4, "tau": 0.005, "gamma": 0.99, "init_alpha": 1.0}
    with pytest.raises(ConfigError) as error:
        pbt.check(pbt.parse({**GOOD, "explore": explore}), 8, 1000, traced, sac.check_config, configs)
    assert fragment in str(error.value) and "\n" not in str(error.value), str(error.value)
    assert "give bounds = [low, high] inside the values it accepts" in str(error.value)
    for fine in ({"gamma": {"perturb": [0.8, 1.25], "bounds": [0.9, 0.999]}}, {"actor_lr": {"perturb": [0.5, 2.0]}},
                 {"tau": {"perturb": [0.5, 0.9]}}, {"tau": {"resample": {"log_uniform": [1e-3, 1e-1]}}}):
        pbt.check(pbt.parse({**GOOD, "explore": fine}), 8, 1000, traced, sac.check_config, configs)


def test_a_sweep_whose_pbt_leaves_a_domain_is_refused_with_one_line(tmp_path):
    from experiments import sweep as sweep_lib

    path = tmp_path / "pbt.toml"
    path.write_text('agent = "sac"\nenvs = ["toy/Pendulum"]\nseeds = 4\n' + TINY_TABLES + """
[pbt]
interval = 200
[pbt.explore]
gamma = {perturb = [0.8, 1.25]}
""")
    with pytest.raises(ConfigError) as error:
        sweep_lib.load(str(path))
    assert "[pbt.explore] gamma: perturbing member 0's 0.99 by [0.8, 1.25] reaches 1.2375" in str(error.value)
    assert "(the population of toy/Pendulum: members [0, 1, 2, 3])" in str(error.value)


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


# ------------------------------------------------------------------------------------------- PBT sweeps

PBT_SWEEP = """
agent = "sac"
envs = ["toy/Pendulum"]
[run]
compilation_cache = "~/.cache/jaxrl/xla-tests"
[grid]
actor_lr = [1e-4, 3e-4, 1e-3, 3e-3]
[pbt]
interval = 200
[pbt.explore]
actor_lr = {perturb = [0.8, 1.25], bounds = [1e-4, 2e-3]}
tau = {resample = {log_uniform = [0.001, 0.05]}}
""" + TINY_TABLES.replace("steps = 400", "steps = 600").replace("num_envs = 4", "num_envs = 2")


def write(tmp_path, text, name="pbt.toml"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def read_csv(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def test_a_pbt_members_id_hashes_the_table_and_its_whole_population(tmp_path):
    from experiments import sweep as sweep_lib

    ids = [m.id for m in sweep_lib.load(write(tmp_path, PBT_SWEEP)).members]
    assert len(set(ids)) == 4
    plain = [m.id for m in sweep_lib.load(write(tmp_path, PBT_SWEEP.split("[pbt]")[0] + TINY_TABLES.replace(
        "steps = 400", "steps = 600").replace("num_envs = 4", "num_envs = 2"), "plain.toml")).members]
    assert not set(ids) & set(plain)  # a PBT member is never a grid member's result
    # The defaults written out are the same table; any edit is another sweep; so is another population.
    spelled = PBT_SWEEP.replace("interval = 200", "interval = 200\nbottom = 0.25\ntop = 0.25\ncopy_buffer = false")
    assert [m.id for m in sweep_lib.load(write(tmp_path, spelled, "spelled.toml")).members] == ids
    for edit in (PBT_SWEEP.replace("interval = 200", "interval = 400"),
                 PBT_SWEEP.replace("[0.8, 1.25]", "[0.5, 2.0]"),
                 PBT_SWEEP.replace("3e-3]", "3e-3, 1e-2]")):
        edited = [m.id for m in sweep_lib.load(write(tmp_path, edit, "edited.toml")).members]
        assert not set(edited) & set(ids)


@pytest.mark.parametrize("edit, fragment", [
    (("1e-3, 3e-3]", "1e-3]"), "bottom = 0.25 and top = 0.25 of a population of 3 give 0 copying"),
    (("interval = 200", "interval = 300"), "interval = 300 must be a positive multiple of the program's chunk of 200"),
    (("tau = {", "hidden_sizes = {"), "[pbt.explore] hidden_sizes: not a numeric (traced) field"),
    (("tau = {", "learning_rate = {"), "[pbt.explore] learning_rate: not a numeric (traced) field"),
    (("interval = 200", "interval = 200\nbottom = 0.5\ntop = 0.75"), "together <= 4"),
])
def test_a_bad_pbt_table_in_a_sweep_file_is_one_line_before_anything_runs(tmp_path, edit, fragment):
    from experiments import sweep as sweep_lib

    with pytest.raises(ConfigError) as error:
        sweep_lib.load(write(tmp_path, PBT_SWEEP.replace(*edit)))
    assert fragment in str(error.value) and "\n" not in str(error.value)


@pytest.fixture(scope="module")
def population(tmp_path_factory):
    """The PBT sweep run whole, and run again into another --out after a stop signal ended it after its first
    chunk (the second run resumes the program from that chunk's checkpoint)."""
    import os
    import signal

    from experiments import sweep as sweep_lib
    from experiments.train import Interrupted
    from jaxrl.logging import RunLogger

    tmp = tmp_path_factory.mktemp("pbt")
    path = write(tmp, PBT_SWEEP)
    whole, stopped = str(tmp / "whole"), str(tmp / "stopped")
    sweep_lib.run_sweep(path, whole, quiet=True)
    log = RunLogger.log

    def log_then_signal(self, metrics):
        row = log(self, metrics)
        os.kill(os.getpid(), signal.SIGTERM)  # as `kill` does: the run stops after this chunk's checkpoint
        return row

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(RunLogger, "log", log_then_signal)
        with pytest.raises(Interrupted, match="at env step 200"):
            sweep_lib.run_sweep(path, stopped, quiet=True)
    sweep_lib.run_sweep(path, stopped, quiet=True)
    return path, whole, stopped


def test_pbt_csv_is_the_lineage_the_program_ran(population):
    """Per interval the worst member copies the best; its actor_lr is the parent's times 0.8 or 1.25 within the
    bounds, its tau a fresh log-uniform draw; every other member keeps its values; fitness is the member's eval
    return at that step. The results table and each member's schedule end in the same values."""
    import json
    import os

    _, out, _ = population
    lineage = read_csv(os.path.join(out, "pbt.csv"))
    results = read_csv(os.path.join(out, "results.csv"))
    slots = {r["member_id"]: int(r["member_in_group"]) for r in results}
    assert len(lineage) == 12 and {int(r["env_steps"]) for r in lineage} == {200, 400, 600}
    configs = {mid: json.load(open(os.path.join(out, "members", mid, "config.json"))) for mid in slots}
    metrics = {mid: read_csv(os.path.join(out, "members", mid, "metrics.csv")) for mid in slots}
    values = {slots[mid]: (c["agent_config"]["actor_lr"], c["agent_config"]["tau"]) for mid, c in configs.items()}
    for step in (200, 400, 600):
        rows = sorted((r for r in lineage if int(r["env_steps"]) == step), key=lambda r: slots[r["member_id"]])
        for r in rows:
            own = next(m for m in metrics[r["member_id"]] if int(m["env_steps"]) == step)
            assert float(r["fitness"]) == float(own["eval/return"])
        copying = [r for r in rows if r["copied"] == "True"]
        assert len(copying) == 1
        (copy,) = copying
        fitness = [float(r["fitness"]) for r in rows]
        assert float(copy["fitness"]) == min(fitness)
        assert float(next(r for r in rows if r["member_id"] == copy["parent_id"])["fitness"]) == max(fitness)
        parent_lr, parent_tau = values[slots[copy["parent_id"]]]
        allowed = [min(max(parent_lr * f, 1e-4), 2e-3) for f in (0.8, 1.25)]
        assert any(float(copy["actor_lr"]) == pytest.approx(v, rel=1e-6) for v in allowed), (copy, allowed)
        assert 0.001 <= float(copy["tau"]) <= 0.05 and float(copy["tau"]) != pytest.approx(parent_tau)
        for r in rows:
            if r is not copy:
                assert (float(r["actor_lr"]), float(r["tau"])) == pytest.approx(values[slots[r["member_id"]]])
        values = {slots[r["member_id"]]: (float(r["actor_lr"]), float(r["tau"])) for r in rows}
    for r in results:
        assert (float(r["final_actor_lr"]), float(r["final_tau"])) == pytest.approx(values[slots[r["member_id"]]])
        schedule = configs[r["member_id"]]["pbt_schedule"]
        assert schedule[0]["from_env_steps"] == 0 and schedule[-1]["to_env_steps"] == 600
        assert all(a["to_env_steps"] == b["from_env_steps"] for a, b in zip(schedule[:-1], schedule[1:], strict=True))


def test_a_pbt_sweep_stopped_by_a_signal_and_run_again_equals_one_never_stopped(population):
    import json
    import os

    from experiments.export import restore_run

    _, whole, stopped = population
    (group,) = os.listdir(os.path.join(whole, "groups"))
    assert os.listdir(os.path.join(stopped, "groups")) == [group]
    a, b = (os.path.join(d, "groups", group) for d in (whole, stopped))
    assert json.load(open(os.path.join(b, "summary.json")))["resumed_from"] == 200
    timing = ("wall_s", "env_steps_per_s")
    rows = [[{k: v for k, v in json.loads(line).items() if k not in timing} for line in open(os.path.join(d,
            "metrics.jsonl"))] for d in (a, b)]
    assert rows[0] == rows[1]
    assert open(os.path.join(a, "pbt.csv")).read() == open(os.path.join(b, "pbt.csv")).read()
    assert open(os.path.join(whole, "pbt.csv")).read() == open(os.path.join(stopped, "pbt.csv")).read()
    first, second = restore_run(a).state, restore_run(b).state
    assert all(np.array_equal(x, y) for x, y in zip(jax.tree.leaves(first), jax.tree.leaves(second), strict=True))


def test_a_rerun_reuses_the_finished_population_and_an_edited_table_is_a_new_one(population, tmp_path):
    from experiments import sweep as sweep_lib

    path, out, _ = population
    assert sweep_lib.plan(sweep_lib.load(path), out) == []
    (group,) = sweep_lib.plan(sweep_lib.load(write(tmp_path, PBT_SWEEP.replace("interval = 200", "interval = 400"))),
                              out)
    assert len(group.members) == 4 and group.pbt.interval == 400
    assert not {m.id for m in group.members} & {m.id for m in sweep_lib.load(path).members}


def test_the_winner_exports_as_a_standalone_run_with_its_values_and_schedule(population, tmp_path, cli):
    import json
    import os

    from experiments.export import restore_run

    _, out, _ = population
    results = read_csv(os.path.join(out, "results.csv"))
    winner = max(results, key=lambda r: float(r["final_eval_return"]))
    group_dir = os.path.join(out, "groups", winner["group"])
    exported = str(tmp_path / "winner")
    assert cli("export", group_dir, "--member", winner["member_in_group"], "--out", exported).returncode == 0
    saved = json.load(open(os.path.join(exported, "config.json")))
    assert "pbt" not in saved and saved["exported_from"]["pbt"]["interval"] == 200
    assert saved["agent_config"]["actor_lr"] == pytest.approx(float(winner["final_actor_lr"]), rel=1e-6)
    member = json.load(open(os.path.join(out, "members", winner["member_id"], "config.json")))
    assert saved["exported_from"]["pbt_schedule"] == member["pbt_schedule"]
    restored = restore_run(exported)
    assert restored.state.pbt is None
    np.testing.assert_allclose(restored.state.hparams.actor_lr, [float(winner["final_actor_lr"])], rtol=1e-6)
    refused = cli("train", "--resume", group_dir, "--steps", "800", "--sac.actor-lr", "1e-3")
    assert refused.returncode == 2 and "are not the ones that run trained" in refused.stderr and \
        refused.stderr.count("\n") == 1, refused.stderr  # a population's values are its own: one line, not a run
    assert cli("plot", out, "--pbt", "--out", str(tmp_path / "pbt.png")).returncode == 0
    assert os.path.getsize(tmp_path / "pbt.png") > 10_000
