"""Where the time of one Arena training iteration goes, by cProfile.

    .venv/bin/python bench/profile_iteration.py [--algo ippo] [--iterations 5] [--recurrent]
    .venv/bin/python bench/profile_iteration.py --algo qmix --env smac/3m-v0
    .venv/bin/python bench/profile_iteration.py --algo mappo --env smac/3m-v0 --paper

PPO on simple_spread with Arena's defaults (4,000 env steps, minibatch 512, 5 epochs), or a
value-based algorithm with its defaults (PyMARL's: 2,000 env steps an iteration, an update of
32 episodes per episode), in the driver (0 EnvRunners, 0 remote Learners), one thread. The first iteration is a warm-up; the
others are profiled. Prints one JSON line: seconds per iteration, and per part (cumulative
time of the functions that do it, per iteration) with its share of the iteration. Parts
overlap where one calls another (``learner_update`` holds the connectors, the loss, backward
and the optimiser), so the shares do not add up to 1.
"""

from __future__ import annotations

import argparse
import cProfile
import json
import os
import pstats
import time

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

# part -> (file path fragment, function name); the cumulative time of every match is summed.
PARTS = {
    "iteration": [("algorithms/algorithm.py", "train")],
    "sampling": [("policies/sampling.py", "rollout")],
    "sampler_episode_building": [("policies/sampling.py", "_cut_episodes")],
    "sampler_gae_arrays": [("policies/ppo/array_path.py", "gae_batch")],
    "learner_update": [
        ("core/learner/learner.py", "update"),
        ("policies/ppo/learner.py", "update"),
    ],
    "learner_connectors": [("connectors/connector_pipeline_v2.py", "__call__")],
    "gae": [("general_advantage_estimation.py", "__call__")],
    "minibatch_slicing": [("minibatch_utils.py", "__iter__")],
    "forward_and_loss": [
        ("core/learner/torch/torch_learner.py", "compute_losses"),
        ("policies/ppo/learner.py", "ppo_loss"),
    ],
    "batch_to_tensors_and_shuffles": [
        ("policies/ppo/learner.py", "_tensors"),
        ("policies/ppo/learner.py", "_gather"),
    ],
    "backward": [("torch/_tensor.py", "backward")],
    # recurrent modules: the learner's chunk unroll (actor and critic), forward and backward
    "gru_unroll_forward": [("policies/modules.py", "grus_unroll")],
    "gru_unroll_backward": [("policies/modules.py", "backward")],
    "optimiser_and_clip": [
        ("torch/optim/adam.py", "step"),
        ("nn/utils/clip_grad.py", "clip_grad_norm_"),
        ("core/learner/torch/torch_learner.py", "postprocess_gradients"),
    ],
    "metrics": [("utils/metrics/metrics_logger.py", "")],
    "weight_sync": [("env/env_runner_group.py", "sync_weights")],
    # value-based (policies/q): sampling whole episodes, the replay, the TD update
    "episode_stitching": [("policies/sampling.py", "add")],
    "replay_add": [("policies/q/replay.py", "add")],
    "replay_sample": [("policies/q/replay.py", "sample")],
    "q_forward_train": [("policies/q/module.py", "_forward_train")],
    "td_loss": [("policies/q/learner.py", "compute_losses")],
}


def cumulative(stats: pstats.Stats, fragment: str, name: str) -> float:
    total = 0.0
    for (path, _, func), (_, _, _, ct, callers) in stats.stats.items():
        if fragment in path and (func == name or (not name and not func.startswith("<"))):
            # Count only entries from outside the part (recursion and self-calls once).
            outside = any(not (fragment in c[0] and (c[2] == name or not name)) for c in callers)
            if outside or not callers:
                total += ct
    return total


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--algo", default="ippo")
    p.add_argument("--iterations", type=int, default=5)
    p.add_argument("--recurrent", action="store_true")
    p.add_argument("--paper", action="store_true", help="mappo on SMAC: the MAPPO paper's setup")
    p.add_argument("--env", default="mpe/simple_spread-v3")
    p.add_argument(
        "--path",
        choices=["arrays", "episodes"],
        default="arrays",
        help="the learner's input: the sampler's arrays (Arena's default for feed-forward "
        "modules) or episodes through RLlib's learner connectors (before the fast path)",
    )
    p.add_argument("--dump", help="also write the raw profile here (pstats)")
    args = p.parse_args()

    import torch

    from policies import algorithm
    from training import runtime

    torch.set_num_threads(1)
    runtime.connect(dashboard=False)
    info = algorithm.get(args.algo)
    settings = info.settings(**({"paper": True} if args.paper else {}))
    if args.recurrent and not args.paper:  # paper=true makes them recurrent itself
        settings.model.recurrent = True
    if hasattr(settings, "test_interval"):
        settings.test_interval = 0  # greedy test episodes are not training
    config = info.build(args.env, settings, num_env_runners=0, seed=0)
    if args.path == "episodes":
        from ray.rllib.algorithms.ppo import PPO

        config.algo_class = PPO
    algo = config.build_algo()
    algo.train()  # warm-up
    prof = cProfile.Profile()
    steps = 0
    t0 = time.perf_counter()
    prof.enable()
    for _ in range(args.iterations):
        steps += algo.train()["env_runners"]["num_env_steps_sampled"]
    prof.disable()
    wall = time.perf_counter() - t0
    algo.stop()
    if args.dump:
        prof.dump_stats(args.dump)
    stats = pstats.Stats(prof)
    per_it = wall / args.iterations
    parts = {}
    for part, matches in PARTS.items():
        secs = sum(cumulative(stats, f, n) for f, n in matches) / args.iterations
        if secs > 0:
            parts[part] = {"s": round(secs, 4), "share": round(secs / per_it, 3)}
    print(
        json.dumps(
            {
                "config": f"arena_{args.algo}{'_gru' if args.recurrent or args.paper else ''}"
                f"{'_paper' if args.paper else ''}/{args.env}",
                "path": args.path,
                "iterations": args.iterations,
                "s_per_iteration": round(per_it, 4),
                "env_steps_per_s": round(steps / wall, 1),
                "parts": parts,
            }
        ),
        flush=True,
    )
    runtime.shutdown()


if __name__ == "__main__":
    main()
