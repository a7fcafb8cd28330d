"""Symphony (experiments/plugins/symphony.py): each term by hand (ReHSE, ReHAE, swaddling and its stop-gradient,
the soft target's node weights, the optimiser without bias correction), the fading replay's probabilities per
row with and without the virtual tile-fill, the reward normaliser at the end of exploration; the harness; the
compiled loop with a checkpoint restored across the end of exploration."""
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from experiments.plugins import symphony
from jaxrl import ConfigError
from jaxrl.testing import check_agent
from jaxrl.types import EnvSpec
from tests.helpers import assert_restored_checkpoint_continues_bitwise, fill

TINY = dict(hidden_size=16, batch_size=8)
SPEC = EnvSpec(obs_size=3, action_size=2, decisions_per_episode=10)


def test_rehse_and_rehae_by_hand():
    x = jnp.array([1.0, -2.0])
    assert float(symphony.rehse(x)) == pytest.approx((math.tanh(0.5) + 2 * math.tanh(1.0)) / 2, rel=1e-6)
    assert float(symphony.rehae(x)) == pytest.approx((math.tanh(0.5) - 2 * math.tanh(1.0)) / 2, rel=1e-6)


def test_swaddling_by_hand_and_no_gradient_through_the_exponents_beta():
    omega = lambda x: math.log((1 + x) / (1 - x))  # noqa: E731
    s, b = 0.5, 0.5
    value = omega(s ** (1 / b)) + b * s * math.log(s) + omega(b ** 2)
    assert float(symphony.swaddling(jnp.array([s]), jnp.array([b]))) == pytest.approx(value, rel=1e-6)
    # d/dB: S ln S + 2B Omega'(B^2), Omega'(x) = 2 / (1 - x^2); the exponent 1/B is held fixed
    d_beta = s * math.log(s) + 2 * b * 2 / (1 - (b ** 2) ** 2)
    grad = jax.grad(lambda beta: symphony.swaddling(jnp.array([s]), beta))(jnp.array([b]))
    assert float(grad[0]) == pytest.approx(d_beta, rel=1e-5)


def test_the_soft_target_weighs_the_sorted_nodes_by_the_codes_formula():
    weights = np.tanh((math.pi * (1 - np.arange(4) / 4)) ** math.e)
    weights /= weights.sum()
    nodes = jnp.array([[3.0, -1.0, 10.0, 0.5]])
    expected = np.sort(np.asarray(nodes[0])) @ weights
    assert float(symphony.soft_value(nodes, math.e)[0]) == pytest.approx(expected, rel=1e-6)
    w = symphony.node_weights(384, math.e)
    assert w.sum() == pytest.approx(1.0) and np.all(np.diff(w) <= 1e-9)  # the highest nodes weigh least
    assert w[int(0.75 * 384)] / w[0] == pytest.approx(0.5, abs=0.03)  # about half at the 75th percentile


def test_the_optimiser_has_no_bias_correction_and_decays_inside_the_step():
    opt = symphony.symphony_adam(lr=0.1, beta1=0.6, beta2=0.9, epsilon=0.0, weight_decay=0.01)
    params = jnp.array(1.0)
    step, state = opt.update(jnp.array(0.5), opt.init(params), params)
    m, v = 0.4 * 0.5, 0.1 * 0.25
    assert float(step) == pytest.approx(-0.1 * (m / math.sqrt(v) + 0.01), rel=1e-6)
    assert float(state.m) == pytest.approx(m) and float(state.v) == pytest.approx(v)


def expected_row_probabilities(rows, steps, explored, exponent=math.e, tile=True):
    """Each position i of a full buffer (oldest 0) has weight tanh((pi i / N)^e); its age a = N - 1 - i maps to
    ring row (ptr - 2 - a) while a < size - 1, else (tile-fill) to exploration row (new - 1 - a) mod E. Without the
    tile-fill, position i of the n = size - 1 sampleable rows has weight tanh((pi i / n)^e)."""
    size, ptr = min(steps, rows), steps % rows
    sampleable = size - 1
    p = np.zeros(rows)
    if not tile:  # the weights over the sampleable rows alone: position i of n, oldest first
        w = np.tanh((math.pi * np.arange(sampleable) / sampleable) ** exponent)
        for i in range(sampleable):
            p[(ptr - 2 - (sampleable - 1 - i)) % rows] += w[i]
        return p / p.sum()
    w = np.tanh((math.pi * np.arange(rows) / rows) ** exponent)
    for i in range(rows):
        a = rows - 1 - i
        if a >= sampleable and size < rows:
            row = (sampleable - explored - 1 - a) % explored
        else:
            row = (ptr - 2 - min(a, sampleable - 1)) % rows
        p[row] += w[i]
    return p / p.sum()


@pytest.mark.parametrize("steps, tile", [(16, True), (16, False), (57, True)])
def test_the_fading_replay_draws_each_row_with_the_codes_probability(steps, tile):
    """A ring of 20 rows (capacity 40, 2 envs); exploration wrote 10 rows. 16 rows written: ages older than the
    data map onto the exploration rows as the tiled buffer holds them; 57 written: the ring is full and wrapped,
    every age is a real row."""
    buffer = fill(capacity=40, steps=steps, episode_length=1000)
    cfg = symphony.Config(batch_size=8, tile_fill=tile)
    state = symphony.State(params=None, target_critic_params=None, opt_state=None, baseline=jnp.float32(0.0),
                           reward_scale=jnp.float32(1.0), exploration_rows=jnp.int32(10), actor=None, critic=None)
    rows = np.asarray(jax.jit(lambda k: symphony.fading_rows(state, buffer, k, 400_000, cfg))(jax.random.PRNGKey(0)))
    frequency = np.bincount(rows, minlength=20) / len(rows)
    expected = expected_row_probabilities(20, steps, 10, tile=tile)
    np.testing.assert_allclose(frequency, expected, atol=0.003)
    newest = (steps - 1) % 20
    assert frequency[newest] == 0  # its s' is not written yet
    batch = symphony.fading_sample(state, buffer, jax.random.PRNGKey(1), cfg)
    np.testing.assert_allclose(batch.next_obs[:, 0], batch.obs[:, 0] + 1)  # s' of each drawn row
    assert batch.obs.shape == (8, 1) and float(batch.discount[0]) == pytest.approx(0.99)


def test_exploration_ends_with_the_reward_scale_and_the_rows_it_wrote_once():
    buffer = fill(capacity=40, steps=12, episode_length=1000)  # rewards t = 0..11 for both envs
    state = symphony.init(jax.random.PRNGKey(0), SPEC, symphony.Config(**TINY))
    ended = symphony.end_of_exploration(state, buffer, None, symphony.Config(**TINY))
    assert float(ended.reward_scale) == pytest.approx(1 / 5.5) and int(ended.exploration_rows) == 12
    later = symphony.end_of_exploration(ended, fill(capacity=40, steps=15, episode_length=1000), None,
                                        symphony.Config(**TINY))
    assert float(later.reward_scale) == float(ended.reward_scale) and int(later.exploration_rows) == 12


def test_the_fall_acts_with_noise_alone_on_decisions_950_to_1000_once_training_started():
    """``S3/train.py`` at c5eb0db: ``active = steps<(limit_step-50) if Q_learning else True`` (limit_step 1000, steps
    from 1), ``select_action(state, action=active, noise=not testing)``, and ``S3/symphony.py``'s actor returns
    tanh(float(action) S A + float(noise) N), N = clamp(randn, -e, e) / e. Envs at decisions 1, 949, 950, 1000 and
    1001 of their episodes (carry: decisions taken before): 950 and 1000 fall (a = tanh(N)), the others act
    tanh(S A + N); the reference in float64 from the actor's (A, S) and the same normal draw."""
    cfg = symphony.Config(**TINY)
    assert cfg.fall and cfg.fall_limit == 1000  # on by default, as in the code
    spec = EnvSpec(obs_size=3, action_size=2, decisions_per_episode=1000)
    state = symphony.init(jax.random.PRNGKey(0), spec, cfg).replace(exploration_rows=jnp.int32(10))
    np.testing.assert_array_equal(symphony.AGENT.init_carry(5, spec, cfg), np.zeros(5))  # episodes start at 0
    obs, key = jax.random.normal(jax.random.PRNGKey(1), (5, 3)), jax.random.PRNGKey(2)
    carry = jnp.array([0, 948, 949, 999, 1000], jnp.int32)
    action, new_carry = jax.jit(symphony.AGENT.act, static_argnums=(3, 4))(state, obs, key, cfg, False, carry)
    np.testing.assert_array_equal(new_carry, carry + 1)
    mean, scale, _ = (np.asarray(x, np.float64) for x in state.actor.apply(state.params["actor"], obs))
    noise = np.clip(np.asarray(jax.random.normal(key, (5, 2)), np.float64), -math.e, math.e) / math.e
    active = np.array([1.0, 1.0, 0.0, 0.0, 1.0])[:, None]  # 1, 949 < 950 act; 950, 1000 fall; 1001 > limit_step
    np.testing.assert_allclose(action, np.tanh(active * scale * mean + noise), rtol=1e-5, atol=1e-6)
    assert np.all(np.abs(scale * mean)[2:4] > 1e-4)  # the policy's part was there to drop
    # Before training starts (exploration), with the fall off, and when evaluating: the policy acts throughout.
    policy = np.tanh(scale * mean + noise)
    for kind, (st, c) in {"exploring": (state.replace(exploration_rows=jnp.int32(0)), cfg),
                          "off": (state, cfg.replace(fall=False))}.items():
        np.testing.assert_allclose(symphony.act(st, obs, key, c, False, carry)[0], policy, rtol=1e-5, atol=1e-6,
                                   err_msg=kind)
    np.testing.assert_allclose(symphony.act(state, obs, key, cfg, True, carry)[0], np.tanh(scale * mean), rtol=1e-5,
                               atol=1e-6)


def test_the_fall_limit_moves_the_window_and_the_loop_keeps_the_decision_clock():
    """fall_limit 100: decisions 50 .. 100 fall. In the compiled loop the carry counts each env's decisions in its
    episode (the env's own count, or its time limit where an episode just ended and the loop resets it next)."""
    import envs
    from jaxrl.loop import LoopConfig, make_train

    cfg = symphony.Config(**TINY, exploration_steps=100, fall_limit=100)
    state = symphony.init(jax.random.PRNGKey(0), SPEC, cfg).replace(exploration_rows=jnp.int32(10))
    np.testing.assert_array_equal(symphony.falling(state, jnp.array([48, 49, 99, 100]), cfg),
                                  [False, True, True, False])
    loop = LoopConfig(steps=120, num_envs=2, num_eval_envs=2, eval_every=120, learning_starts=100, buffer_size=1000,
                      warmup="policy", updates_per_step=1.0)
    trainer = make_train(symphony.AGENT, envs.make("toy/Pendulum", 2), envs.make("toy/Pendulum", 2), loop, cfg)
    trained, _ = trainer.run_chunk(trainer.init(0, 1))
    np.testing.assert_array_equal(trained.carry, trained.env.episode_step)  # 60 decisions into a 200-step episode
    np.testing.assert_array_equal(trained.carry, [[60, 60]])


def test_symphony_refuses_bad_values_in_one_line():
    for fields, message in [({"hidden_size": 30}, "multiple of 4"), ({"beta1": 1.0}, "beta1 must be"),
                            ({"scale_floor": 0.5}, "scale_floor must be"),
                            ({"fall_limit": 51}, "fall_limit=51 must be > 51")]:
        with pytest.raises(ConfigError, match=message):
            symphony.check_config(symphony.Config(**fields))


def test_symphony_passes_the_harness():
    check_agent(symphony.AGENT, symphony.Config(**TINY, exploration_steps=100), eager=False)


def test_symphony_trains_and_continues_bitwise_across_the_end_of_exploration(tmp_path):
    """Two seeds on toy/PointMass, exploration = learning start = 100 env steps (50 rows of 2 envs): after the
    first chunk the reward scale is fitted and the fading replay with its virtual copies is in use; a restored
    checkpoint continues exactly."""
    import envs
    from jaxrl.loop import LoopConfig, make_train

    loop = LoopConfig(steps=400, num_envs=2, num_eval_envs=2, eval_every=200, learning_starts=100, buffer_size=1000,
                      warmup="policy", updates_per_step=1.0)
    cfg = symphony.Config(**TINY, exploration_steps=100)
    trainer = make_train(symphony.AGENT, envs.make("toy/PointMass", 2), envs.make("toy/PointMass", 2), loop, cfg)
    state, metrics = trainer.run_chunk(trainer.init(0, 2))
    metrics = jax.device_get(metrics)
    assert metrics["updates"] > 0 and all(np.all(v == -1) for v in metrics["nonfinite_step"].values())
    np.testing.assert_array_equal(state.agent.exploration_rows, [50, 50])
    assert np.all(state.agent.reward_scale != 1.0) and np.all(state.agent.baseline != 0.0)
    assert_restored_checkpoint_continues_bitwise(trainer, state, tmp_path)


def test_symphony_from_the_cli_and_ace_in_a_sweep_as_users_type_them(cli, tmp_path, monkeypatch):
    """What the README's plug-in table says to type, from a working directory: ``--agent module:ATTR``, a relative
    run dir and its resume; ACE's own flags in a sweep file's [agent_config] and [grid]."""
    import csv
    import json
    import os

    monkeypatch.chdir(tmp_path)
    tiny = ["--env", "toy/PointMass", "--eval-every", "200", "--learning-starts", "100", "--num-envs", "2",
            "--num-eval-envs", "2", "--buffer-size", "1000"]
    first = cli("train", "--agent", "experiments.plugins.symphony:AGENT", *tiny, "--steps", "400",
                "--symphony.hidden-size", "16", "--symphony.batch-size", "8", "--symphony.exploration-steps", "100",
                "--run-dir", "runs/symphony")
    assert first.returncode == 0, first.stderr
    resumed = cli("train", "--resume", "runs/symphony", "--steps", "600")
    assert resumed.returncode == 0, resumed.stderr
    summary = json.load(open("runs/symphony/summary.json"))
    assert summary["resumed_from"] == 400 and summary["env_steps"] == 600 and summary["agent"] == "symphony"
    with open("ace.toml", "w") as f:
        f.write('agent = "experiments.plugins.ace:AGENT"\nenvs = ["toy/PointMass"]\nseeds = 1\n\n[loop]\n'
                "steps = 400\neval_every = 200\nlearning_starts = 100\nnum_envs = 2\nnum_eval_envs = 2\n"
                "buffer_size = 1000\n\n[agent_config]\nhidden_sizes = [16]\nbatch_size = 16\ncausal_interval = 200\n"
                "causal_sample_size = 200\nreset_interval = 40\nreset_after = 0\n\n[grid]\n"
                "dormant_threshold = [0.05, 0.1]\n")
    swept = cli("sweep", "ace.toml", "--out", "sweeps/ace")
    assert swept.returncode == 0, swept.stderr
    rows = list(csv.DictReader(open(os.path.join("sweeps", "ace", "results.csv"))))
    assert sorted(float(r["dormant_threshold"]) for r in rows) == [0.05, 0.1]
    assert all(int(r["env_steps"]) >= 400 for r in rows)
