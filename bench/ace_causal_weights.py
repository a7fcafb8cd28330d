"""ACE's jittable causal weights (experiments/plugins/ace.py) against DirectLiNGAM on the same replay samples.

    pip install -e '.[ace]'          # causal-learn, the library whose DirectLiNGAM the official code vendors
    python bench/ace_causal_weights.py --env dmc/CheetahRun --samples 10000
    python bench/ace_causal_weights.py --run runs/ace-dmc-CheetahRun-...     # a run's newest replay transitions
    python bench/ace_causal_weights.py --synthetic                            # a linear case with a known answer
    python bench/ace_causal_weights.py --synthetic --out F; ... --env E --out F   # a stamped line per comparison
    python bench/ace_causal_weights.py --sentence bench/results/ace_causal_weights.jsonl  # docs/plugins/ace.md's

The samples: by default ``--samples`` transitions under uniform random actions from ``--env`` (what ACE's first
estimate sees: its warm-up is 10k uniform steps and the estimate at 10k fits the newest 10k), or with ``--run`` the
newest transitions of a trained run's replay buffer (its last checkpoint), or with ``--synthetic`` a linear
non-Gaussian case whose weights are known: s ~ U(-1, 1)^4, a ~ U(-1, 1)^3, r = 0.5 s_0 + a_0 - 0.5 a_1 + 0.1
Laplace, so beta = (1, -0.5, 0) and w = 3 softmax(1, -0.5, 0) (DirectLiNGAM needs non-Gaussian noise to orient
edges). Both estimators see X = [s, a, r], raw: DirectLiNGAM (pwling, adaptive-lasso adjacency B; beta_i = B[r,
a_i], 0 where it orders a_i after r) and the ridge regression of r on [s, a]; w = |A| softmax(beta) for each. Prints
both w, their largest difference, the Spearman rank correlation of the two beta, where DirectLiNGAM put the reward
in its causal order, and the seconds each took; with ``--out`` the same as one JSON line with provenance.
"""
from __future__ import annotations

import argparse
import os
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from devtime import emit, latest, measured_on, read_rows


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


def synthetic_samples(samples: int, seed: int):
    rng = np.random.default_rng(seed)
    obs, action = rng.uniform(-1, 1, (samples, 4)), rng.uniform(-1, 1, (samples, 3))
    reward = 0.5 * obs[:, 0] + action[:, 0] - 0.5 * action[:, 1] + 0.1 * rng.laplace(size=samples)
    return obs.astype(np.float32), action.astype(np.float32), reward.astype(np.float32)


def weights(beta):
    e = np.exp(beta - np.max(beta))
    return len(beta) * e / e.sum()


def ordinal(n: int) -> str:
    return {1: "first", 2: "second", 3: "third"}.get(n, f"{n}th")


def sentence(path: str) -> str:
    """ace.md's words: the synthetic case's weights and agreement, each env's (or run's) agreement and where
    DirectLiNGAM put the reward, and what DirectLiNGAM cost; the newest line per case."""
    rows = latest(read_rows(path), "kind", "env")
    parts = []
    for row in rows:
        gap = f"{row['max_w_difference']:.4f}"
        if row["kind"] == "synthetic":
            w = ", ".join(f"{x:.3f}" for x in row["w_ridge"])
            parts.append(f"on the synthetic case with a known answer (`--synthetic`: beta (1, -0.5, 0)) both give "
                         f"w = ({w}) to {gap}")
            continue
        where = (f"{row['samples'] // 1000}k uniform-random transitions of `{row['env']}`" if row["kind"] == "env"
                 else f"the newest {row['samples'] // 1000}k transitions of the run `{row['env']}`")
        order = f"it orders the reward {ordinal(row['reward_position'])} of {row['order_length']}"
        if any(row["beta_lingam"]):
            agreement = f"the two w differ by at most {gap} ({order})"
        else:
            off_one = max(abs(x - 1) for x in row["w_ridge"] + row["w_lingam"])
            agreement = f"both give w = 1 within {off_one:.4f} (DirectLiNGAM's reward row is 0: {order})"
        parts.append(f"on {where} ({row['action_size']} actions) {agreement}")
    seconds = [row["lingam_s"] for row in rows]
    return (f"{'; '.join(parts)}. DirectLiNGAM took {min(seconds):.1f} to {max(seconds):.1f} s on the host per "
            f"estimate; the ridge runs inside the program ({measured_on(rows[-1]['provenance'])}; `python "
            f"bench/ace_causal_weights.py --sentence {path}`)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--env", default="dmc/CheetahRun")
    parser.add_argument("--samples", type=int, default=10_000)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--run", default=None, help="a run directory: its replay's newest transitions instead")
    parser.add_argument("--synthetic", action="store_true", help="the linear case with a known answer instead")
    parser.add_argument("--out", default=None, help="also append the comparison as a JSON line (with provenance)")
    parser.add_argument("--sentence", default=None, metavar="JSONL", help="print ace.md's words from this file")
    args = parser.parse_args()
    if args.sentence:
        print(sentence(args.sentence))
        return
    try:
        from causallearn.search.FCMBased import lingam
    except ImportError:
        sys.exit("this comparison needs causal-learn: pip install -e '.[ace]'")
    import jax.numpy as jnp
    from scipy.stats import spearmanr

    from experiments.plugins import ace

    if args.synthetic:
        obs, action, reward = synthetic_samples(args.samples, args.seed)
        source = "the synthetic linear case (known beta = [1, -0.5, 0])"
    elif args.run:
        obs, action, reward = run_samples(args.run, args.samples)
        source = f"run {args.run}"
    else:
        obs, action, reward = random_samples(args.env, args.samples, args.seed)
        source = f"{args.env}, uniform random actions, seed {args.seed}"
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
    print(f"{n} transitions from {source}; |S| = {obs_size}, |A| = {action_size}")
    print(f"DirectLiNGAM places the reward at position {order.index(reward_index) + 1} of {len(order)} in its causal "
          f"order; actions after it: {after_reward}")
    np.set_printoptions(precision=3, suppress=True, linewidth=140)
    print(f"beta  DirectLiNGAM {lingam_beta}")
    print(f"beta  ridge        {ridge_beta}")
    print(f"w     DirectLiNGAM {lingam_w}")
    print(f"w     ridge (jit)  {ridge}")
    distinct = action_size > 2 and np.ptp(lingam_beta) > 0 and np.ptp(ridge_beta) > 0
    rho = spearmanr(lingam_beta, ridge_beta).statistic if distinct else float("nan")
    print(f"max |w difference| {np.max(np.abs(lingam_w - ridge)):.4f}; Spearman rank correlation of beta {rho:.3f}; "
          f"seconds: DirectLiNGAM {lingam_s:.1f}, ridge {ridge_s:.2f} (compile included)")
    kind = "synthetic" if args.synthetic else "run" if args.run else "env"
    emit({"kind": kind, "env": None if args.synthetic else args.run or args.env, "samples": n, "seed": args.seed,
          "obs_size": obs_size, "action_size": action_size, "reward_position": order.index(reward_index) + 1,
          "order_length": len(order), "beta_lingam": lingam_beta.tolist(), "beta_ridge": ridge_beta.tolist(),
          "w_lingam": lingam_w.tolist(), "w_ridge": ridge.tolist(), "max_w_difference": float(np.max(np.abs(
              lingam_w - ridge))), "spearman": None if np.isnan(rho) else float(rho),
          "lingam_s": round(lingam_s, 2), "ridge_s": round(ridge_s, 2)}, args.out)


if __name__ == "__main__":
    main()
