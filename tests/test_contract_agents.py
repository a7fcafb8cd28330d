"""The network contract in every built-in agent, not only SAC: optional target networks, optimiser settings (the
learning-rate schedule read from ``state.progress`` by each optimiser of the agent), and networks with mutable
collections whose statistics the built-in losses hand back for the gradient step to write. Tiny widths, a fixed
synthetic batch, one compiled update per configuration."""
import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from agents import crossq, dsac_t, fastsac, fasttd3, sac, simbav2, td3, tdmpc2, tqc
from jaxrl import ConfigError
from jaxrl import progress as progress_lib
from jaxrl.networks import _takes_train
from jaxrl.optim import trainable
from jaxrl.types import Batch, EnvSpec, WindowBatch

SPEC = EnvSpec(obs_size=3, action_size=2, decisions_per_episode=100)
B, H = 8, 2
SPLIT = dict(actor_hidden_sizes=(16, 16), critic_hidden_sizes=(16, 16), batch_size=B)
# policy_delay 1 where an agent has one: every update then moves every network, which the target test needs
MODULES = {
    "sac": (sac, sac.Config(hidden_sizes=(16, 16), batch_size=B)),
    "td3": (td3, td3.Config(hidden_sizes=(16, 16), batch_size=B, policy_delay=1)),
    "tqc": (tqc, tqc.Config(**SPLIT, num_critics=2, num_quantiles=5, drop_per_critic=1)),
    "dsac_t": (dsac_t, dsac_t.Config(**SPLIT, policy_delay=1)),
    "fasttd3": (fasttd3, fasttd3.Config(**SPLIT, num_atoms=11, policy_delay=1)),
    "fastsac": (fastsac, fastsac.Config(**SPLIT, num_atoms=11, policy_delay=1)),
    "simbav2": (simbav2, simbav2.Config(actor_hidden_dim=16, critic_hidden_dim=16, batch_size=B, num_bins=11)),
    "tdmpc2": (tdmpc2, tdmpc2.Config(latent_dim=16, hidden_dim=16, encoder_dim=16, num_q=2, num_samples=16,
                                     num_elites=4, num_pi_trajs=4, iterations=1, batch_size=B, horizon=H)),
    "crossq": (crossq, crossq.Config(actor_hidden_sizes=(8, 8), critic_hidden_sizes=(16, 16), batch_size=B,
                                     policy_delay=1)),
}
WITH_TARGETS = [name for name in MODULES if name != "crossq"]
WITH_CRITIC = [name for name in MODULES if name != "tdmpc2"]
# each target field and the online parameters it copies
TARGETS = {"target_critic_params": lambda s: s.critic_params, "target_actor_params": lambda s: s.actor_params,
           "target_q_params": lambda s: s.model_params["params"]["q_nets"]}


def batch_for(name):
    keys = jax.random.split(jax.random.PRNGKey(7), 4)
    if name == "tdmpc2":
        return WindowBatch(obs=jax.random.normal(keys[0], (B, H + 1, 3)),
                           action=jax.random.uniform(keys[1], (B, H, 2), minval=-1, maxval=1),
                           reward=jax.random.normal(keys[2], (B, H)), terminated=jnp.zeros((B, H)),
                           truncated=jnp.zeros((B, H)), valid=jnp.ones((B,), bool))
    return Batch(obs=jax.random.normal(keys[0], (B, 3)),
                 action=jax.random.uniform(keys[1], (B, 2), minval=-1, maxval=1),
                 reward=jax.random.normal(keys[2], (B,)), next_obs=jax.random.normal(keys[3], (B, 3)),
                 terminated=jnp.zeros(B).at[0].set(1.0), truncated=jnp.zeros(B), discount=jnp.full((B,), 0.99))


def trained_fields(state) -> dict:
    """What the optimisers move: every online ``*params`` field, and the temperature."""
    names = [n for n in vars(state) if n.endswith("params") and not n.startswith("target")]
    return {n: getattr(state, n) for n in names + (["log_alpha"] if hasattr(state, "log_alpha") else [])}


def differs(a, b) -> bool:
    return any(not np.array_equal(x, y) for x, y in zip(jax.tree.leaves(a), jax.tree.leaves(b), strict=True))


@pytest.mark.parametrize("name", WITH_TARGETS)
def test_without_target_networks_an_agent_trains_exactly_as_with_targets_copied_from_the_online_networks(name):
    """target_networks=False keeps no copy and runs no Polyak step, its targets reading the online networks: the
    same run as targets with tau = 1 (each update copies the online networks into them)."""
    module, cfg = MODULES[name]
    cfg = cfg.replace(tau=1.0)
    without = cfg.replace(target_networks=False)
    state = module.init(jax.random.PRNGKey(0), SPEC, without)
    targets = [field for field in TARGETS if hasattr(state, field)]
    assert targets and all(getattr(state, field) is None for field in targets)
    copied = state.replace(**{field: TARGETS[field](state) for field in targets})
    update, batch = jax.jit(module.update), batch_for(name)
    for k in range(3):
        state, metrics = update(state, batch, jax.random.PRNGKey(10 + k), without)
        copied, _ = update(copied, batch, jax.random.PRNGKey(10 + k), cfg)
        assert all(np.isfinite(float(v)) for v in jax.tree.leaves(metrics))
    assert all(getattr(state, field) is None for field in targets)
    jax.tree.map(np.testing.assert_array_equal, trained_fields(state), trained_fields(copied))


def test_an_agent_that_cannot_drop_its_targets_has_no_such_switch():
    assert not hasattr(crossq.Config(), "target_networks")  # CrossQ has none to drop


class CountsTrainingPasses(nn.Module):
    """A critic with a mutable collection: ``passes`` counts the training passes whose statistics were kept."""

    inner: nn.Module

    @nn.compact
    def __call__(self, obs, action, train: bool = False):
        passes = self.variable("batch_stats", "passes", lambda: jnp.zeros((), jnp.float32))
        if train and not self.is_initializing():
            passes.value = passes.value + 1.0
        return self.inner(obs, action, train=train) if _takes_train(self.inner) else self.inner(obs, action)


def with_counting_critic(module, state, cfg):
    """``state`` with its critics (and target critics) wrapped in ``CountsTrainingPasses``, the critic optimiser
    state rebuilt on the new parameter tree."""
    def wrapped(params):
        return None if params is None else {"params": {"inner": params["params"]},
                                           "batch_stats": {"passes": jnp.zeros((), jnp.float32)}}

    critic_params = wrapped(state.critic_params)
    replaced = dict(critic=CountsTrainingPasses(state.critic), critic_params=critic_params,
                    critic_opt_state=module.optimizers(cfg)[1].init(trainable(critic_params)))
    if hasattr(state, "target_critic_params"):  # CrossQ has none
        replaced["target_critic_params"] = wrapped(state.target_critic_params)
    return state.replace(**replaced)


@pytest.mark.parametrize("name", WITH_CRITIC)
def test_every_optimiser_follows_the_schedule_and_critic_statistics_are_written_once_per_step(name):
    """One compiled update per agent, two facts: (1) a linear schedule at the end of the planned updates gives
    every optimiser of the agent a learning rate of 0 (so ``state.progress`` reaches each of them), while at the
    start every trained field moves; (2) a critic with a mutable collection gets the statistics of exactly one
    training pass per gradient step written back: the built-in losses return them, the gradient step keeps them."""
    module, cfg = MODULES[name]
    cfg = cfg.replace(lr_schedule="linear")
    state = with_counting_critic(module, module.init(jax.random.PRNGKey(0), SPEC, cfg), cfg)
    update, batch = jax.jit(module.update), batch_for(name)

    def after(updates_done):
        attached = progress_lib.attach(state, progress_lib.at(updates_done, 0, 100, 1000))
        return progress_lib.detach(update(attached, batch, jax.random.PRNGKey(3), cfg)[0])

    start, end = after(0), after(100)
    for field, before in trained_fields(state).items():
        params_only = lambda tree: tree["params"] if isinstance(tree, dict) and "params" in tree else tree  # noqa: E731
        assert differs(params_only(before), params_only(trained_fields(start)[field])), f"{field} did not move"
        jax.tree.map(lambda a, b: np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-7),
                     params_only(before), params_only(trained_fields(end)[field]))
    for moved in (start, end):
        assert float(moved.critic_params["batch_stats"]["passes"]) == 1.0


def test_tdmpc2_schedule_reaches_the_world_model_and_the_policy():
    module, cfg = MODULES["tdmpc2"]
    cfg = cfg.replace(lr_schedule="cosine")
    state = module.init(jax.random.PRNGKey(0), SPEC, cfg)
    update, batch = jax.jit(module.update), batch_for("tdmpc2")
    end = update(progress_lib.attach(state, progress_lib.at(100, 0, 100, 1000)), batch, jax.random.PRNGKey(3), cfg)[0]
    start = update(progress_lib.attach(state, progress_lib.at(0, 0, 100, 1000)), batch, jax.random.PRNGKey(3), cfg)[0]
    for field in ("model_params", "policy_params"):
        assert differs(getattr(state, field), getattr(start, field))
        jax.tree.map(np.testing.assert_array_equal, getattr(state, field), getattr(end, field))


@pytest.mark.parametrize("name", list(MODULES))
def test_every_agent_offers_the_optimiser_settings_and_refuses_bad_ones_in_one_line(name):
    module, cfg = MODULES[name]
    for field in ("adam_b1", "adam_b2", "adam_eps", "weight_decay", "max_grad_norm", "lr_schedule"):
        assert hasattr(cfg, field), field
    with pytest.raises(ConfigError, match="lr_schedule"):
        module.check_config(cfg.replace(lr_schedule="step"))
    with pytest.raises(ConfigError, match="adam_b1"):
        module.check_config(cfg.replace(adam_b1=1.5))


def test_tdmpc2_refuses_a_second_clipping_setting():
    module, cfg = MODULES["tdmpc2"]
    with pytest.raises(ConfigError, match="grad_clip_norm"):
        module.check_config(cfg.replace(max_grad_norm=1.0))


@pytest.mark.parametrize("name,field,value", [("crossq", "adam_b1", 0.5), ("fasttd3", "weight_decay", 0.1),
                                              ("fastsac", "adam_b2", 0.95), ("fastsac", "weight_decay", 0.001),
                                              ("sac", "adam_b1", 0.9), ("tqc", "max_grad_norm", None)])
def test_agents_keep_their_official_optimiser_defaults(name, field, value):
    assert getattr(MODULES[name][0].Config(), field) == value


@pytest.mark.parametrize("name", ["ace", "aro_ddpg", "bl_sac", "dr_sac", "redq"])
def test_plugins_built_on_an_agents_targets_train_without_them(name):
    """The plug-ins whose own targets read the base agent's target networks follow its ``target_networks=False``:
    the online networks under stop_gradient, no copy kept (ACE's soft reset has none to blend)."""
    from experiments.examples import redq
    from experiments.plugins import ace, aro_ddpg, bl_sac, dr_sac

    agent = {"ace": ace.AGENT, "aro_ddpg": aro_ddpg.AGENT, "bl_sac": bl_sac.AGENT, "dr_sac": dr_sac.AGENT,
             "redq": redq.AGENT}[name]
    extra = {"bl_sac": {"bl_samples": 3}, "dr_sac": {"model_samples": 4}}.get(name, {})
    cfg = agent.Config(hidden_sizes=(8,), batch_size=B, target_networks=False, **extra)
    state = agent.init(jax.random.PRNGKey(0), SPEC, cfg)
    assert state.target_critic_params is None
    attached = progress_lib.attach(state, progress_lib.at(10, 10, 100, 1000))
    new_state, metrics = jax.jit(agent.update)(attached, batch_for("sac"), jax.random.PRNGKey(1), cfg)
    assert new_state.target_critic_params is None
    assert all(np.isfinite(float(v)) for v in jax.tree.leaves(metrics))
    if name == "ace":
        assert ace.soft_reset(new_state, jax.random.PRNGKey(2), cfg).target_critic_params is None


@pytest.mark.slow
def test_the_hook_tables_flags_train_on_the_command_line(cli, tmp_path):
    """The README's flags as users type them: TD3 without targets, TQC-style Adam settings and a cosine schedule."""
    import json
    import os

    run_dir = tmp_path / "td3-no-targets"
    result = cli("train", "--agent", "td3", "--env", "toy/Pendulum", "--steps", "300", "--num-envs", "4",
                 "--num-eval-envs", "2", "--eval-every", "100", "--learning-starts", "200", "--buffer-size", "4000",
                 "--td3.hidden-sizes", "16", "16", "--td3.batch-size", "32", "--td3.target-networks", "False",
                 "--td3.adam-b1", "0.5", "--td3.lr-schedule", "cosine", "--run-dir", str(run_dir))
    assert result.returncode == 0, result.stderr
    saved = json.load(open(os.path.join(run_dir, "config.json")))["agent_config"]
    assert (saved["target_networks"], saved["adam_b1"], saved["lr_schedule"]) == (False, 0.5, "cosine"), saved
    rows = [json.loads(line) for line in open(os.path.join(run_dir, "metrics.jsonl"))]
    assert rows[-1]["env_steps"] == 300 and abs(rows[-1]["train/critic_loss"]) < 1e6, rows[-1]
