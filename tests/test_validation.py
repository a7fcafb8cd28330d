"""Bad configuration values fail on the host with one line naming the field, the value and what is allowed.

Fast: nothing here trains or compiles a training program. Every bad value below was accepted (or crashed with
something other than a ConfigError) before the checks existed.
"""
import dataclasses
import json

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents import get_agent
from experiments import configs
from jaxrl import ConfigError
from jaxrl.checks import SEED_MAX, check_seed
from jaxrl.loop import LoopConfig, check_loop_config, default_loop_config, make_schedule

AGENTS = ["sac", "td3", "tqc", "dsac_t", "simbav2", "tdmpc2", "fasttd3", "fastsac", "crossq"]
NAN, INF = float("nan"), float("inf")


def assert_one_line(error, *fragments):
    message = str(error.value)
    assert isinstance(error.value, ConfigError) and "\n" not in message, message
    for fragment in fragments:
        assert fragment in message, message


# (field, bad value, fragment of the message besides the field name); the value must appear as written.
COMMON_SAC_LIKE = [
    ("batch_size", 0, "0"), ("batch_size", -4, "-4"), ("batch_size", 32.0, "32.0"), ("batch_size", True, "True"),
    ("actor_lr", -1.0, "-1.0"), ("actor_lr", 0.0, "0.0"), ("critic_lr", NAN, "nan"), ("critic_lr", INF, "inf"),
    ("critic_lr", -1e-3, "-0.001"), ("actor_lr", "fast", "'fast'"),
    ("actor_lr", np.float32(-3e-4), "-0.0003"), ("critic_lr", jnp.asarray(NAN), "nan"),
    ("gamma", 1.5, "1.5"), ("gamma", 0.0, "0.0"), ("gamma", -0.99, "-0.99"), ("gamma", NAN, "nan"),
    ("tau", 0.0, "0.0"), ("tau", 2.0, "2.0"), ("tau", jnp.asarray(-0.005), "-0.005"),
]
SAC_TEMPERATURE = [
    ("alpha_lr", 0.0, "0.0"), ("alpha_lr", INF, "inf"), ("init_alpha", 0.0, "0.0"), ("init_alpha", -1.0, "-1.0"),
    ("init_alpha", NAN, "nan"), ("target_entropy", NAN, "nan"), ("target_entropy", -INF, "-inf"),
]
SPLIT_WIDTHS = [
    ("actor_hidden_sizes", (16, 0), "(16, 0)"), ("critic_hidden_sizes", (16, -1), "(16, -1)"),
    ("critic_hidden_sizes", (16.0, 16), "(16.0, 16)"), ("actor_hidden_sizes", 16, "16"),
]
C51 = [("num_atoms", 1, "1"), ("num_atoms", 51.0, "51.0"), ("v_min", 1000.0, "v_min=1000.0"),
       ("v_max", NAN, "v_max=nan")]
BAD = {
    "sac": COMMON_SAC_LIKE + SAC_TEMPERATURE + [
        ("hidden_sizes", (256, 0), "(256, 0)"), ("hidden_sizes", (-1,), "(-1,)"),
        ("hidden_sizes", (8.5, 8), "(8.5, 8)"),
        ("hidden_sizes", (True, 8), "(True, 8)"), ("hidden_sizes", 256, "256"), ("hidden_sizes", [16, 0], "[16, 0]"),
        ("log_std_min", 2.0, "log_std_min=2.0"), ("log_std_max", -6.0, "log_std_max=-6.0"),
        ("log_std_min", -INF, "log_std_min=-inf"), ("log_std_max", NAN, "log_std_max=nan"),
    ],
    "td3": COMMON_SAC_LIKE + [
        ("hidden_sizes", (256, 0), "(256, 0)"), ("policy_delay", 0, "0"), ("policy_delay", 1.5, "1.5"),
        ("policy_delay", 99_999_999_999, "99999999999"), ("hidden_sizes", (2**31, 8), "(2147483648, 8)"),
        ("batch_size", 2**40, "1099511627776"),
        ("policy_noise", -0.2, "-0.2"), ("policy_noise", NAN, "nan"), ("noise_clip", -0.5, "-0.5"),
        ("noise_clip", INF, "inf"), ("exploration_noise", -0.1, "-0.1"), ("exploration_noise", NAN, "nan"),
    ],
    "tqc": COMMON_SAC_LIKE + SAC_TEMPERATURE + SPLIT_WIDTHS + [
        ("num_critics", 0, "0"), ("num_critics", 2.0, "2.0"), ("num_quantiles", 25.0, "25.0"),
        ("drop_per_critic", 1.5, "1.5"),
    ],
    "dsac_t": COMMON_SAC_LIKE + SAC_TEMPERATURE + SPLIT_WIDTHS + [
        ("policy_delay", 1.5, "1.5"), ("activation", "swish", "'swish'"), ("tau_b", 0.0, "0.0"),
        ("tau_b", 1.5, "1.5"), ("clip_boundary", 0.0, "0.0"), ("clip_boundary", -3.0, "-3.0"),
        ("epsilon_b", 0.0, "0.0"), ("epsilon_b", NAN, "nan"), ("huber_delta", -50.0, "-50.0"),
        ("huber_delta", INF, "inf"),
    ],
    "simbav2": [f for f in COMMON_SAC_LIKE if f[0] not in ("actor_lr", "critic_lr")] + SAC_TEMPERATURE[2:] + [
        ("actor_hidden_dim", 0, "0"), ("critic_hidden_dim", -512, "-512"), ("critic_hidden_dim", 512.0, "512.0"),
        ("actor_num_blocks", 0, "0"), ("critic_num_blocks", -1, "-1"), ("expansion", 0, "0"),
        ("num_bins", 101.0, "101.0"), ("lr_decay_updates", 1e6, "1000000.0"),
        ("lr_init", 0.0, "0.0"), ("lr_init", -1e-4, "-0.0001"), ("lr_init", NAN, "nan"), ("lr_final", -5e-5, "-5e-05"),
        ("lr_final", INF, "inf"), ("c_shift", 0.0, "0.0"), ("c_shift", NAN, "nan"), ("max_return", 0.0, "0.0"),
        ("max_return", -5.0, "-5.0"),
    ],
    "fasttd3": COMMON_SAC_LIKE + SPLIT_WIDTHS + C51 + [
        ("policy_delay", 0, "0"), ("policy_noise", -0.2, "-0.2"), ("noise_clip", NAN, "nan"),
        ("std_min", 0.5, "std_min=0.5"), ("std_max", NAN, "std_max=nan"), ("std_min", -0.1, "-0.1"),
        ("init_scale", 0.0, "0.0"), ("weight_decay", -0.1, "-0.1"),
    ],
    "fastsac": COMMON_SAC_LIKE + SAC_TEMPERATURE[:5] + SPLIT_WIDTHS + C51 + [
        ("num_critics", 0, "0"), ("policy_delay", 2.0, "2.0"), ("log_std_max", -6.0, "log_std_max=-6.0"),
        ("weight_decay", NAN, "nan"), ("alpha_weight_decay", -0.01, "-0.01"), ("adam_b2", 1.0, "1.0"),
        ("target_entropy_ratio", INF, "inf"),
    ],
    "crossq": [f for f in COMMON_SAC_LIKE if f[0] != "tau"] + SAC_TEMPERATURE + SPLIT_WIDTHS + [
        ("adam_b1", 1.0, "1.0"), ("adam_b2", -0.1, "-0.1"), ("batch_renorm_momentum", 1.0, "1.0"),
        ("batch_renorm_warmup", -1, "-1"), ("batch_renorm_warmup", 1.5, "1.5"), ("policy_delay", 0, "0"),
        ("num_critics", 0, "0"), ("log_std_min", 3.0, "log_std_min=3.0"),
    ],
    "tdmpc2": [f for f in COMMON_SAC_LIKE if f[0] not in ("actor_lr", "critic_lr")] + [
        ("latent_dim", 0, "0"), ("hidden_dim", 0, "0"), ("hidden_dim", 512.0, "512.0"), ("encoder_dim", -256, "-256"),
        ("simnorm_dim", 0, "0"), ("num_bins", 1, "1"), ("num_bins", 0, "0"), ("horizon", 0, "0"),
        ("horizon", -3, "-3"), ("iterations", 0, "0"), ("num_samples", 512.0, "512.0"), ("dropout", -0.01, "-0.01"),
        ("dropout", 1.0, "1.0"), ("lr", 0.0, "0.0"), ("lr", -3e-4, "-0.0003"), ("lr", NAN, "nan"),
        ("encoder_lr_scale", 0.0, "0.0"), ("grad_clip_norm", 0.0, "0.0"), ("grad_clip_norm", -20.0, "-20.0"),
        ("consistency_coef", -20.0, "-20.0"), ("reward_coef", NAN, "nan"), ("value_coef", -0.1, "-0.1"),
        ("entropy_coef", INF, "inf"), ("rho", 0.0, "0.0"), ("rho", 1.5, "1.5"), ("temperature", 0.0, "0.0"),
        ("temperature", -0.5, "-0.5"), ("min_std", 0.0, "0.0"), ("min_std", 3.0, "min_std=3.0"),
        ("max_std", 0.01, "max_std=0.01"), ("max_std", INF, "inf"),
    ],
}


@pytest.mark.parametrize("agent_name, field, value, fragment",
                         [(a, *case) for a in AGENTS for case in BAD[a]],
                         ids=[f"{a}-{c[0]}={c[2]}" for a in AGENTS for c in BAD[a]])
def test_bad_agent_values_fail_with_one_line(agent_name, field, value, fragment):
    agent = get_agent(agent_name)
    cfg = agent.Config().replace(**{field: value})
    with pytest.raises(ConfigError) as e:
        agent.check_config(cfg)
    assert_one_line(e, field, fragment)


@pytest.mark.parametrize("agent_name", AGENTS)
def test_default_configs_pass(agent_name):
    agent = get_agent(agent_name)
    agent.check_config(agent.Config())
    check_loop_config(default_loop_config(agent))


@pytest.mark.parametrize("agent_name", ["sac", "tqc", "dsac_t"])
def test_numpy_and_jax_scalars_and_none_are_accepted(agent_name):
    agent = get_agent(agent_name)
    cfg = agent.Config().replace(actor_lr=np.float32(1e-3), critic_lr=jnp.asarray(3e-4), gamma=np.float64(0.99),
                                 tau=jnp.float32(1.0), init_alpha=1, target_entropy=None)
    agent.check_config(cfg)
    agent.check_config(cfg.replace(target_entropy=jnp.asarray(-3.0)))


def test_zero_coefficients_and_edge_values_are_accepted():
    tdmpc2 = get_agent("tdmpc2")
    tdmpc2.check_config(tdmpc2.Config(reward_coef=0.0, entropy_coef=0.0, dropout=0.0, rho=1.0, gamma=1.0,
                                      horizon=1, lr=np.float32(1e-3)))
    td3 = get_agent("td3")
    td3.check_config(td3.Config(policy_noise=0.0, noise_clip=0.0, exploration_noise=0.0))


# ------------------------------------------------------------------------------------------------ LoopConfig

LOOP = LoopConfig(steps=1000, num_envs=4, num_eval_envs=2, eval_every=200, learning_starts=200, buffer_size=2000)

BAD_LOOP = [
    (dict(updates_per_step=INF), ["updates_per_step", "inf", "(0, 1024]"]),
    (dict(updates_per_step=NAN), ["updates_per_step", "nan", "(0, 1024]"]),
    (dict(updates_per_step=2048.0), ["updates_per_step", "2048.0", "(0, 1024]"]),
    (dict(updates_per_step=5e-324), ["updates_per_step=5e-324", "num_envs=4"]),
    (dict(learning_starts=1000), ["learning_starts=1000", "steps=1000", "no update"]),
    (dict(learning_starts=5000), ["learning_starts=5000", "steps=1000"]),
    (dict(learning_starts=1.5), ["learning_starts", "1.5"]),
    (dict(steps=2**31 - 100, eval_every=1000), ["steps=2147483548", "1000 env steps", "int32"]),
    (dict(steps=2**30, eval_every=256, updates_per_step=4.0),
     ["steps=1073741824", "updates_per_step=4.0", "4294967296 updates"]),
    (dict(pretrain_updates=2**31 - 10), ["pretrain_updates=2147483638", "int32"]),
    (dict(reward_scale_max_return=0.0), ["reward_scale_max_return", "0.0"]),
    (dict(reward_scale_max_return=-5.0), ["reward_scale_max_return", "-5.0"]),
    (dict(reward_scale_max_return=NAN), ["reward_scale_max_return", "nan"]),
    (dict(episode_length=0), ["episode_length", "0"]),
    (dict(episode_length=-5), ["episode_length", "-5"]),
    (dict(episode_length=1.5), ["episode_length", "1.5"]),
    (dict(num_envs=True), ["num_envs", "True"]),
    (dict(episode_length=99_999_999_999), ["episode_length", "<= 2147483647", "99999999999"]),
    (dict(eval_every=2**32), ["eval_every must be a positive integer <= 2147483647", "4294967296"]),
    (dict(num_eval_envs=2**33), ["num_eval_envs", "8589934592"]),
]


@pytest.mark.parametrize("overrides, fragments", BAD_LOOP, ids=[repr(o) for o, _ in BAD_LOOP])
def test_bad_loop_values_fail_with_one_line(overrides, fragments):
    cfg = dataclasses.replace(LOOP, **overrides)
    for check in (check_loop_config, make_schedule):
        with pytest.raises(ConfigError) as e:
            check(cfg)
        assert_one_line(e, *fragments)


def test_loop_edge_values_pass():
    check_loop_config(dataclasses.replace(LOOP, updates_per_step=1024.0, learning_starts=999, episode_length=1))
    check_loop_config(dataclasses.replace(LOOP, steps=2**31 - 1000, eval_every=200, learning_starts=0))
    check_loop_config(dataclasses.replace(LOOP, steps=2**28, updates_per_step=4.0, pretrain_updates=5000))


def test_make_train_refuses_before_building_anything():
    """The Python API gets the same errors as the CLI (check_config and the loop checks run first)."""
    import envs
    from jaxrl.loop import make_train

    sac = get_agent("sac")
    env = envs.make("toy/Pendulum", 4)
    with pytest.raises(ConfigError, match="^actor_lr must be a finite number > 0, got -1$"):
        make_train(sac, env, env, LOOP, sac.Config(hidden_sizes=(16, 16), batch_size=32, actor_lr=-1))
    with pytest.raises(ConfigError, match="learning_starts=1000 must be < steps=1000"):
        make_train(sac, env, env, dataclasses.replace(LOOP, learning_starts=1000), sac.Config(batch_size=32))


def _returns_three(state, batch, key, cfg):
    import agents.sac

    state, metrics = agents.sac.update(state, batch, key, cfg)
    return state, metrics, {}


def _casts_a_leaf(state, batch, key, cfg):
    import agents.sac

    state, metrics = agents.sac.update(state, batch, key, cfg)
    return state.replace(log_alpha=state.log_alpha.astype(jnp.float16)), metrics


def _drops_a_leaf(state, batch, key, cfg):
    import agents.sac

    state, metrics = agents.sac.update(state, batch, key, cfg)
    return state.replace(alpha_opt_state=()), metrics


def _vector_metric(state, batch, key, cfg):
    import agents.sac

    state, metrics = agents.sac.update(state, batch, key, cfg)
    return state, {**metrics, "q_per_sample": jnp.zeros(cfg.batch_size)}


@pytest.mark.parametrize("update, fragments", [
    (_returns_three, ["broken's update returned a tuple of 3 value(s): it must return (state, metrics)"]),
    (_casts_a_leaf, ["broken's update changes state leaf .log_alpha from float32[] to float16[]"]),
    (_drops_a_leaf, ["broken's update changes the state's structure (leaves added or removed: ",
                     ".alpha_opt_state"]),
    (_vector_metric, ["broken's update returned metric 'q_per_sample' of shape [32]: metrics must be scalars"]),
], ids=["three-values", "dtype", "structure", "vector-metric"])
def test_an_update_that_breaks_the_loops_contract_is_one_line_before_compiling(update, fragments):
    """Before: a 39-line scan error from inside XLA's tracing (exit 1), or a vector metric averaged silently."""
    import envs
    from jaxrl.loop import make_train

    sac = get_agent("sac")
    env = envs.make("toy/Pendulum", 4)
    with pytest.raises(ConfigError) as error:
        make_train(sac._replace(name="broken", update=update), env, env, LOOP, sac.Config(hidden_sizes=(16, 16),
                                                                                            batch_size=32))
    assert_one_line(error, *fragments)


def test_an_n_step_return_longer_than_an_episode_is_refused_before_compiling():
    """Before: --sac.n-step 1000000 trained (1000x slower, every window cut at the episode's end)."""
    import envs
    from jaxrl.loop import make_train

    sac = get_agent("sac")
    env = envs.make("toy/Pendulum", 4)
    with pytest.raises(ConfigError) as error:
        make_train(sac, env, env, LOOP, sac.Config(batch_size=32, n_step=1_000_000))
    assert_one_line(error, "n_step=1000000 is longer than toy/Pendulum's episodes (200 agent decisions)")
    make_train(sac, env, env, LOOP, sac.Config(batch_size=32, hidden_sizes=(8,), n_step=200))  # the longest allowed


def test_progress_past_the_planned_end_stays_at_one():
    """run_chunk called past the plan from Python: schedules hold their end values instead of extrapolating."""
    from jaxrl import progress

    late = progress.at(updates=300, env_steps=1500, planned_updates=100, planned_env_steps=1000)
    assert float(late.fraction) == 1.0 and float(late.update_fraction) == 1.0
    assert float(late.interpolate(1.0, 0.0, over=2.0)) == pytest.approx(0.5)  # half of 'over' is the whole run
    early = progress.at(updates=25, env_steps=250, planned_updates=100, planned_env_steps=1000)
    assert float(early.fraction) == 0.25 and float(early.update_fraction) == 0.25


def test_make_train_and_check_agent_refuse_another_agents_config_and_a_mismatched_env_batch():
    import envs
    from jaxrl.loop import make_train
    from jaxrl.testing import AgentCheckError, check_agent

    sac, td3 = get_agent("sac"), get_agent("td3")
    env = envs.make("toy/Pendulum", 4)
    with pytest.raises(ConfigError) as error:
        make_train(sac, env, env, LOOP, td3.Config(batch_size=32))
    assert_one_line(error, "the config is a agents.td3.Config, not agent 'sac''s agents.sac.Config")
    with pytest.raises(AgentCheckError, match=r"^\[config\] the config is a agents.td3.Config, not agent 'sac'"):
        check_agent(sac, td3.Config(batch_size=32))
    with pytest.raises(ConfigError) as error:
        make_train(sac._replace(name=""), env, env, LOOP, sac.Config(batch_size=32))
    assert_one_line(error, "the agent's name is ''")
    with pytest.raises(ConfigError) as error:
        make_train(sac, envs.make("toy/Pendulum", 3), env, LOOP, sac.Config(batch_size=32))
    assert_one_line(error, f"env steps 3 envs at once but loop.num_envs is {LOOP.num_envs}")
    with pytest.raises(ConfigError) as error:
        make_train(sac, envs.make("toy/Pendulum", 4, action_repeat=2), env, LOOP, sac.Config(batch_size=32))
    assert_one_line(error, "env repeats each action 2 times but loop.action_repeat is 1")


# --------------------------------------------------------------------------------------- config file types


def _run_config():
    from experiments.rundir import RunConfig

    return RunConfig


BAD_TYPES = [
    ("sac", "agent_config", "actor_lr", "fast", "field actor_lr = 'fast' must be a float"),
    ("sac", "agent_config", "actor_lr", True, "field actor_lr = True must be a float"),
    ("sac", "agent_config", "batch_size", 32.0, "field batch_size = 32.0 must be an int"),
    ("sac", "agent_config", "batch_size", True, "field batch_size = True must be an int"),
    ("sac", "agent_config", "hidden_sizes", 16, "field hidden_sizes = 16 must be a list of ints"),
    ("sac", "agent_config", "hidden_sizes", [16, "16"], "field hidden_sizes = [16, '16'] must be a list of ints"),
    ("sac", "agent_config", "critic_layer_norm", 1, "field critic_layer_norm = 1 must be a bool"),
    ("sac", "agent_config", "target_entropy", "auto", "field target_entropy = 'auto' must be a float or null"),
    ("dsac_t", "agent_config", "activation", 3, "field activation = 3 must be a string"),
    ("sac", "loop", "steps", "1e6", "field steps = '1e6' must be an int"),
    ("sac", "loop", "steps", 1e6, "field steps = 1000000.0 must be an int"),
    ("sac", "loop", "episode_length", 1.5, "field episode_length = 1.5 must be an int or null"),
    ("sac", "loop", "normalize_obs", "yes", "field normalize_obs = 'yes' must be a bool"),
    ("sac", "loop", "warmup", ["uniform"], "field warmup = ['uniform'] must be a string"),
    ("sac", "run", "seed", "0", "field seed = '0' must be an int"),
    ("sac", "run", "run_dir", 5, "field run_dir = 5 must be a string or null"),
]


@pytest.mark.parametrize("agent_name, section, field, value, message", BAD_TYPES,
                         ids=[f"{s}.{f}={v!r}" for _, s, f, v, _ in BAD_TYPES])
def test_config_file_values_of_the_wrong_type_fail_with_one_line(agent_name, section, field, value, message):
    cls = {"agent_config": get_agent(agent_name).Config, "loop": LoopConfig, "run": _run_config()}[section]
    with pytest.raises(ConfigError) as e:
        configs.check_fields(cls, {field: value}, f"config x.toml [{section}]")
    assert_one_line(e, f"config x.toml [{section}]: {message}")


def test_json_values_of_a_saved_run_pass_the_type_check():
    """config.json holds lists for tuples, null for None and ints for whole floats: all accepted."""
    from experiments.rundir import config_to_dict

    for name in AGENTS:
        agent = get_agent(name)
        for cls, cfg in ((agent.Config, agent.Config()), (LoopConfig, default_loop_config(agent)),
                         (_run_config(), _run_config()())):
            values = json.loads(json.dumps(config_to_dict(cfg)))
            configs.check_fields(cls, values, "config.json")
    configs.check_fields(get_agent("sac").Config, {"actor_lr": 1, "target_entropy": None, "hidden_sizes": [8]}, "x")
    configs.check_fields(LoopConfig, {"episode_length": None, "updates_per_step": 2}, "x")


@pytest.mark.parametrize("name", configs.list_configs())
def test_every_named_config_passes_the_type_and_value_checks(name):
    from experiments.rundir import config_from_dict

    saved = configs.load(name)
    agent = get_agent(saved["agent"])
    for cls, section in ((_run_config(), "run"), (LoopConfig, "loop"), (agent.Config, "agent_config")):
        configs.check_fields(cls, saved[section], f"config {name} [{section}]")
    check_loop_config(dataclasses.replace(default_loop_config(agent), **saved["loop"]))
    agent.check_config(config_from_dict(agent.Config, saved["agent_config"]))


# ---------------------------------------------------------------------------------------------------- seeds


def key_data(seed):
    return tuple(int(x) for x in np.asarray(jax.random.key_data(jax.random.PRNGKey(seed))))


def test_prng_key_keeps_only_the_seed_mod_2_to_the_32():
    """What check_seed's range rests on (x64 disabled, the default): no error, but a silent wrap outside it."""
    assert not jax.config.jax_enable_x64
    assert key_data(SEED_MAX) == (0, SEED_MAX) and key_data(0) == (0, 0)
    assert key_data(SEED_MAX + 1) == key_data(0)
    assert key_data(-1) == key_data(SEED_MAX)


@pytest.mark.parametrize("seed, count", [(0, 1), (SEED_MAX, 1), (SEED_MAX - 3, 4), (np.int64(7), 2), (2**31, 1)])
def test_seeds_in_range_pass(seed, count):
    check_seed(seed, count)


@pytest.mark.parametrize("seed, count, fragments", [
    (-1, 1, ["-1", "[0, 4294967295]"]),
    (2**32, 1, ["4294967296", "[0, 4294967295]"]),
    (2**64, 1, ["18446744073709551616", "[0, 4294967295]"]),
    (SEED_MAX - 2, 4, ["4294967293", "[0, 4294967292]", "4 seeds"]),
    (1.5, 1, ["1.5", "integer"]),
    (True, 1, ["True", "integer"]),
    ("3", 1, ["'3'", "integer"]),
])
def test_seeds_out_of_range_fail_with_one_line(seed, count, fragments):
    with pytest.raises(ConfigError) as e:
        check_seed(seed, count)
    assert_one_line(e, "seed", *fragments)


def test_observation_parts_are_chosen_before_compiling_with_one_line_errors():
    import envs
    from jaxrl.loop import LoopConfig, describe, observation_roles

    structured = envs.make("toy/PrivilegedBandit", 2).spec
    roles = observation_roles(structured, LoopConfig())
    assert (roles.actor_obs, roles.critic_obs) == ("state", "privileged_state")
    assert observation_roles(structured, LoopConfig(critic_obs="state")).critic_obs == "state"  # symmetric
    with pytest.raises(ConfigError, match=r"critic_obs='privileged' is not a part .* parts: state, privileged_state"):
        observation_roles(structured, LoopConfig(critic_obs="privileged"))
    flat, sac = envs.make("toy/Pendulum", 2), get_agent("sac")
    with pytest.raises(ConfigError, match="actor_obs='state': this env's observation is one flat vector"):
        describe(sac, flat, flat, LoopConfig(actor_obs="state", buffer_size=1000), sac.Config())
