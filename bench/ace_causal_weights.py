"""ACE's jittable causal weights (experiments/plugins/ace.py) against DirectLiNGAM on the same replay samples.

    pip install -e '.[ace]'          # causal-learn, the library whose DirectLiNGAM the official code vendors
    python bench/ace_causal_weights.py --env dmc/CheetahRun --samples 10000
    python bench/ace_causal_weights.py --run runs/ace-dmc-CheetahRun-...     # a run's newest replay transitions

The samples: by default ``--samples`` transitions under uniform random actions from ``--env`` (what ACE's first
estimate sees: its warm-up is 10k uniform steps and the estimate at 10k fits the newest 10k), or with ``--run`` the
newest transitions of a trained run's replay buffer (its last checkpoint). Both estimators see X = [s, a, r], raw:
DirectLiNGAM (pwling, adaptive-lasso adjacency B; beta_i = B[r, a_i], 0 where it orders a_i after r) and the
ridge regression of r on [s, a]; w = |A| softmax(beta) for each. Prints both w, their largest difference, the
Spearman rank correlation of the two beta, where DirectLiNGAM put the reward in its causal order, and the seconds
each took.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def random_samples(env_name: str, samples: int, seed: int, num_envs: int = 16):
    import jax

    import envs

    env = envs.make(env_name, num_envs)

    @jax.jit
    def collect(key):
        def step(env_state, key):
            action = jax.random.uniform(key, (num_envs, env.spec.action_size), minval=-1.0, maxval=1.0)
            next_state, out = env.step(env_state, action)
            return next_state, (env_state.obs, action, out.reward)

        reset_key, key = jax.random.split(key)
        _, (obs, action, reward) = jax.lax.scan(step, env.reset(reset_key),
                                                jax.random.split(key, -(-samples // num_envs)))
        return obs.reshape(-1, obs.shape[-1]), action.reshape(-1, action.shape[-1]), reward.reshape(-1)

    obs, action, reward = jax.device_get(collect(jax.random.PRNGKey(seed)))
    return np.asarray(obs[-samples:]), np.asarray(action[-samples:]), np.asarray(reward[-samples:])


def run_samples(run_dir: str, samples: int):
    import jax

    from experiments.export import restore_run
    from jaxrl import buffer as buffer_lib

    state = restore_run(run_dir).state
    buffer = jax.tree.map(lambda x: x[0], state.buffer)  # the first member
    recent = jax.device_get(buffer_lib.recent(buffer, samples))
    obs = np.concatenate([np.asarray(x) for x in jax.tree.leaves(recent.obs)], axis=-1)
    valid = np.asarray(recent.valid)
    return obs[valid], np.asarray(recent.action)[valid], np.asarray(recent.reward)[valid]


def weights(beta):
    e = np.exp(beta - np.max(beta))
    return len(beta) * e / e.sum()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="dmc/CheetahRun")
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--run", default=None, help="a run directory: its replay's newest transitions instead")
    args = parser.parse_args()
    try:
        from causallearn.search.FCMBased import lingam
    except ImportError:
        sys.exit("this comparison needs causal-learn: pip install -e '.[ace]'")
    import jax.numpy as jnp
    from scipy.stats import spearmanr

    from experiments.plugins import ace

    obs, action, reward = run_samples(args.run, args.samples) if args.run else \
        random_samples(args.env, args.samples, args.seed)
    n, obs_size, action_size = len(reward), obs.shape[1], action.shape[1]
    t0 = time.perf_counter()
    ridge = np.asarray(ace.causal_weights_from(jnp.asarray(obs), jnp.asarray(action), jnp.asarray(reward),
                                               jnp.ones(n, bool), 1e-6))
    ridge_s = time.perf_counter() - t0
    features = np.concatenate([obs, action], axis=1)
    centred = features - features.mean(0)
    coefficients = np.linalg.solve(centred.T @ centred / n + 1e-6 * np.eye(features.shape[1]),
                                   centred.T @ (reward - reward.mean()) / n)
    ridge_beta = coefficients[obs_size:]
    t0 = time.perf_counter()
    model = lingam.DirectLiNGAM()
    model.fit(np.concatenate([obs, action, reward[:, None]], axis=1).astype(np.float64))
    lingam_s = time.perf_counter() - t0
    reward_index = obs_size + action_size
    lingam_beta = np.asarray(model.adjacency_matrix_)[reward_index, obs_size:reward_index]
    lingam_w = weights(lingam_beta)
    order = list(model.causal_order_)
    after_reward = [i - obs_size for i in order[order.index(reward_index) + 1:] if obs_size <= i < reward_index]
    source = f"run {args.run}" if args.run else f"{args.env}, uniform random actions, seed {args.seed}"
    print(f"{n} transitions from {source}; |S| = {obs_size}, |A| = {action_size}")
    print(f"DirectLiNGAM places the reward at position {order.index(reward_index) + 1} of {len(order)} in its causal "
          f"order; actions after it: {after_reward}")
    np.set_printoptions(precision=3, suppress=True, linewidth=140)
    print(f"beta  DirectLiNGAM {lingam_beta}")
    print(f"beta  ridge        {ridge_beta}")
    print(f"w     DirectLiNGAM {lingam_w}")
    print(f"w     ridge (jit)  {ridge}")
    rho = spearmanr(lingam_beta, ridge_beta).statistic if action_size > 2 else float("nan")
    print(f"max |w difference| {np.max(np.abs(lingam_w - ridge)):.4f}; Spearman rank correlation of beta {rho:.3f}; "
          f"seconds: DirectLiNGAM {lingam_s:.1f}, ridge {ridge_s:.2f} (compile included)")


if __name__ == "__main__":
    main()
