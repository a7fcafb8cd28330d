"""Playground's robots train end to end: FastTD3 on two envs of T1, G1, Go1 and the LEAP hand (rotating a cube),
the actor on ``state`` and the critics on ``privileged_state``, for a few batched steps (policy actions -> env step
-> buffer) and updates, through the engine's own phases. Learning on them is for an accelerator (a robot's MJX
step compiles in ~40 s here and runs ~19 batched steps/s at 64 envs); these check that the program compiles and
runs with finite values. Evaluation is left out: it would compile the robot's step a second time. The humanoids
T1 and G1 train only under ``pytest --all-robots``: T1 was the suite's longest robot test (260 s of a 105-minute
suite on a 2-core CPU without AVX-512, 2026-12-08; G1 compiles longer still), and both run the code Go1 runs (a
joystick task's state and privileged state, the same loop); T1's push switch is checked below without compiling."""
import jax
import jax.numpy as jnp
import numpy as np
import pytest

import envs
from agents import fasttd3
from jaxrl import loop as loop_lib

LOOP = loop_lib.LoopConfig(num_envs=2, num_eval_envs=1, buffer_size=64, learning_starts=0, warmup="policy",
                           normalize_obs=True, updates_per_step=1.0)
CFG = fasttd3.Config(actor_hidden_sizes=(16,), critic_hidden_sizes=(16,), batch_size=8, num_atoms=11, v_min=-5.0,
                     v_max=5.0, n_step=2)
STEPS, UPDATES = 6, 2


# Go1 trains with Playground's domain randomiser and its pushes (pert_config) switched on.
RANDOMISED = {"locomotion/Go1JoystickFlatTerrain": dict(domain_randomization=True, push_randomization=True)}


@pytest.mark.slow
@pytest.mark.parametrize("task", [pytest.param("locomotion/T1JoystickFlatTerrain", marks=pytest.mark.all_robots),
                                  pytest.param("locomotion/G1JoystickFlatTerrain", marks=pytest.mark.all_robots),
                                  "locomotion/Go1JoystickFlatTerrain", "manipulation/LeapCubeRotateZAxis"])
def test_a_robot_trains_a_few_steps_with_the_critic_on_the_privileged_state(task):
    env = envs.make(task, LOOP.num_envs, **RANDOMISED.get(task, {}))
    program = loop_lib.describe(fasttd3.AGENT, env, env, LOOP, CFG)
    assert (program.spec.actor_obs, program.spec.critic_obs) == ("state", "privileged_state")
    parts = dict(program.spec.obs_parts)
    state = loop_lib.init(program, 0, 1)

    @jax.jit
    def collect_then_learn(state):
        episodes = loop_lib.Episodes(jnp.zeros(1), jnp.zeros(1))
        keys = jax.random.split(state.key[0], STEPS)
        (state, _), _ = jax.lax.scan(lambda c, k: loop_lib.act_and_collect(program, c, k[None]), (state, episodes),
                                     keys)
        one = jax.tree.map(lambda x: x[0] if x.ndim else x, state)
        return state, loop_lib.learn(program, one.agent, one.hparams, one.buffer, one.normalizers, one.key, UPDATES)

    state, (agent, metrics) = collect_then_learn(state)
    assert int(state.buffer.size[0]) == STEPS and int(state.env_steps) == STEPS * LOOP.num_envs
    for name, part in parts.items():  # each part stored once per slot, with the robot's real values
        stored = np.asarray(state.buffer.obs[name][0, :STEPS])
        assert stored.shape == (STEPS, LOOP.num_envs, part) and np.isfinite(stored).all() and stored.std() > 0
    # The first layers read each part's width: the actor the state, the critics privileged state + action.
    actor_in = agent.actor_params["params"]["inner"]["MLP_0"]["Dense_0"]["kernel"].shape[0]
    critic_in = agent.critic_params["params"]["inner"]["VmapQNetwork_0"]["MLP_0"]["Dense_0"]["kernel"].shape[1]
    assert actor_in == parts["state"] and critic_in == parts["privileged_state"] + program.spec.action_size
    for name in ("critic_loss", "actor_loss", "q_mean"):
        assert np.isfinite(metrics[name]), (name, metrics[name])
    before = jax.tree.leaves(jax.tree.map(lambda x: x[0], state.agent.critic_params))
    assert any(not np.array_equal(a, b) for a, b in zip(before, jax.tree.leaves(agent.critic_params), strict=True))
    if task in RANDOMISED:  # each env simulates its own model fields (friction, masses, ...), drawn at reset
        fields, _ = state.env.raw
        drawn = [np.asarray(f[0]) for f in fields]
        assert drawn and all(f.shape[0] == LOOP.num_envs for f in drawn)
        assert any(not np.allclose(f[0], f[1]) for f in drawn)


def test_pushes_switch_in_the_tasks_config_and_randomisation_is_refused_where_playground_has_none():
    from envs.menagerie import use_packaged_menagerie
    from envs.registry import _switch_pushes
    from jaxrl import ConfigError

    use_packaged_menagerie()
    from mujoco_playground import locomotion, manipulation

    t1 = locomotion.get_default_config("T1JoystickFlatTerrain")
    assert t1.push_config.enable  # Playground's default for its humanoids
    _switch_pushes("locomotion/T1JoystickFlatTerrain", t1, False)
    assert not t1.push_config.enable and list(t1.push_config.magnitude_range) == [0.0, 0.0]  # as FastTD3 does
    go1 = locomotion.get_default_config("Go1JoystickFlatTerrain")
    assert not go1.pert_config.enable
    _switch_pushes("locomotion/Go1JoystickFlatTerrain", go1, True)
    assert go1.pert_config.enable
    with pytest.raises(ConfigError, match="PandaPickCube has no random pushes"):
        _switch_pushes("manipulation/PandaPickCube", manipulation.get_default_config("PandaPickCube"), True)
    with pytest.raises(ConfigError, match="dmc/CartpoleBalance has neither"):
        envs.make_raw("dmc/CartpoleBalance", domain_randomization=True)
    with pytest.raises(ConfigError, match="PandaPickCube has no domain randomiser"):
        envs.make_raw("manipulation/PandaPickCube", domain_randomization=True)
