"""Sampling and training throughput: Arena's sampler against RLlib's default multi-agent path.

    .venv/bin/python bench/train_throughput.py [--iterations 3] [--runners 0,1]
        [--jaxmarl-python bench/.jaxmarl-venv/bin/python] [--value | --smac]

Both sides run PPO, batch 4,000 env steps, minibatch 512, 5 epochs, OMP_NUM_THREADS=1, in
one Ray session. RLlib's default is ``ParallelPettingZooEnv`` with RLlib's own EnvRunner and
connectors; Arena's is ``policies.sampling.VectorEnvRunner``. Configurations:

* mpe2 simple_spread_v3, one policy shared by all agents (Arena on its vectorised NumPy core),
  with 0 and 1 remote EnvRunners, and Arena's MAPPO;
* simple_tag_v3 with two policies, adversaries and the good agent (Arena: B mpe2 envs behind
  the batch interface, ``--policies per_group``);
* simple_spread with recurrent policies: Arena's MAPPO with ``model.recurrent`` (GRU, the
  learner on 16-step chunks of the arrays) against RLlib's default PPO with ``use_lstm``
  (max_seq_len 16 both), Arena's GRU on RLlib's episodes (the path before), and the GRU's
  rate over Arena's feed-forward MAPPO;
* Arena's ippo and mappo with the learner fed episodes through RLlib's learner connectors (the
  path before ``policies.ppo.array_path``), and the bare single-file PPO loop of
  ``bench/bare_ppo.py`` (the floor) on the same core and settings;
* JaxMARL's IPPO (``bench/jaxmarl_ippo.py --speed``: its published feed-forward MPE
  baseline with the settings above, the whole training loop one compiled XLA program), run
  first, in its own venv (``make jaxmarl-venv``; ``--jaxmarl-python``), before Ray starts;
  skipped with a note when that venv is missing. Its compile time is reported apart;
* the MAPPO paper's SMAC setup (``--smac``): Arena's MAPPO on smac/3m-v0 with
  ``--set paper=true`` (a GRU over 10-step chunks, 8 envs x 400 steps a batch, 15 epochs),
  the same settings with feed-forward modules, the GRU with ``learner_threads=2``, and the
  GRU learning from RLlib's episodes (the path before), in one run, and the ratios;
* value-based (``--value``): Arena's QMIX and IQL (PyMARL's defaults: one env, an update of 32
  whole episodes per episode sampled; IQL also feed-forward) against RLlib's own multi-agent
  DQN (``MultiAgentEpisodeReplayBuffer``, one shared module) on simple_spread with the same
  batch (32 episodes of 25 steps = 800 transitions) and the same updates per env step
  (``training_intensity`` 32), 2,000 env steps an iteration. Sampling is timed apart (2,000
  env steps of each side's EnvRunner, no learning).

The first iteration of each configuration is a warm-up; the others are averaged.

Prints one JSON line per configuration (``sample_env_steps_per_s``: env steps over the time
spent sampling; ``train_env_steps_per_s``: env steps over whole iterations; for Arena the
sampling time's split into env stepping, the policy's forward pass and bookkeeping) and a
final ``summary`` line with the ratios (``vs_jaxmarl``: Arena's ippo and the bare loop over
JaxMARL's env steps/s, after compiling).
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import subprocess
import time
from pathlib import Path

os.environ.setdefault("OMP_NUM_THREADS", "1")
os.environ.setdefault("RAY_AUTH_MODE", "disabled")

BATCH, MINIBATCH, EPOCHS = 4000, 512, 5
ENV_ID = "mpe/simple_spread-v3"
SMAC_ENV = "smac/3m-v0"
BENCH = Path(__file__).resolve().parent
JAXMARL_PYTHON = BENCH / ".jaxmarl-venv" / "bin" / "python"


def rllib_default_config(
    env: str, num_env_runners: int, seed: int = 0, *, per_group: bool = False, recurrent=False
):
    """RLlib's default path on mpe2's ``env`` scenario: one shared policy, or one policy per
    role (``adversary_0`` -> ``adversary``)."""
    import importlib

    from ray.rllib.algorithms.ppo import PPOConfig
    from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv
    from ray.tune.registry import register_env

    module = importlib.import_module(f"mpe2.{env}")
    name = f"bench_{env}_default"
    register_env(name, lambda cfg: ParallelPettingZooEnv(module.parallel_env()))
    roles = sorted({a.rsplit("_", 1)[0] for a in module.parallel_env().possible_agents})
    if per_group:
        policies = set(roles)
        mapping = lambda agent_id, *a, **k: agent_id.rsplit("_", 1)[0]  # noqa: E731
    else:
        policies = {"shared"}
        mapping = lambda agent_id, *a, **k: "shared"  # noqa: E731
    config = (
        PPOConfig()
        .environment(name)
        .env_runners(num_env_runners=num_env_runners)
        .multi_agent(policies=policies, policy_mapping_fn=mapping)
        .training(train_batch_size_per_learner=BATCH, minibatch_size=MINIBATCH, num_epochs=EPOCHS)
        .debugging(seed=seed)
    )
    if recurrent:
        config.rl_module(model_config={"use_lstm": True, "max_seq_len": 16})
    return config


def arena_config(
    algo: str,
    num_env_runners: int,
    seed: int = 0,
    *,
    env_id=ENV_ID,
    sharing="auto",
    recurrent=False,
):
    from policies import algorithm

    info = algorithm.get(algo)
    settings = info.settings(train_batch_size=BATCH, minibatch_size=MINIBATCH, num_epochs=EPOCHS)
    settings.model.recurrent = recurrent
    return info.build(env_id, settings, num_env_runners=num_env_runners, seed=seed, sharing=sharing)


def smac_paper_config(recurrent: bool, seed: int = 0, learner_threads: int = 1):
    """Arena's MAPPO with the MAPPO paper's settings on smac/3m-v0 (``paper=true``), or the
    same settings with feed-forward modules."""
    import dataclasses

    from policies import algorithm
    from policies.mappo import paper_settings

    info = algorithm.get("mappo")
    settings = info.settings(paper=True, test_interval=0, learner_threads=learner_threads)
    if not recurrent:  # the paper's settings, filled in here, with feed-forward modules
        settings = paper_settings(SMAC_ENV, settings)
        model = dataclasses.replace(settings.model, recurrent=False)
        settings = dataclasses.replace(settings, paper=False, model=model)
    return info.build(SMAC_ENV, settings, seed=seed)


def smac_paper(iterations: int) -> None:
    from ray.rllib.algorithms.ppo import PPO

    ff = measure("arena_mappo_paper_feed_forward/smac_3m", smac_paper_config(False), iterations)
    rnn = measure("arena_mappo_paper_gru/smac_3m", smac_paper_config(True), iterations)
    two = measure(
        "arena_mappo_paper_gru_learner_threads=2/smac_3m", smac_paper_config(True, 0, 2), iterations
    )
    config = smac_paper_config(True)
    config.algo_class = PPO  # the recurrent path before: episodes, RLlib's connectors
    episodes = measure("arena_mappo_paper_gru_episode_path/smac_3m", config, iterations)
    rate = rnn["train_env_steps_per_s"]
    summary = {
        "summary": "smac_paper",
        "gru_over_feed_forward": rate / ff["train_env_steps_per_s"],
        "gru_arrays_over_episodes": rate / episodes["train_env_steps_per_s"],
        "gru_two_learner_threads_over_one": two["train_env_steps_per_s"] / rate,
    }
    print(json.dumps(summary), flush=True)


def measure(name: str, config, iterations: int) -> dict:
    algo = config.build_algo()
    rows = []
    for _ in range(iterations):
        t0 = time.perf_counter()
        result = algo.train()
        wall = time.perf_counter() - t0
        er = result["env_runners"]
        sample_s = result["timers"]["env_runner_sampling_timer"]
        rows.append(
            {
                "steps": er["num_env_steps_sampled"],
                "wall": wall,
                "sample_s": sample_s,
                "env_s": er.get("sampler_env_s"),
                "policy_s": er.get("sampler_policy_s"),
                "total_s": er.get("sampler_total_s"),
                "return": er.get("episode_return_mean"),
            }
        )
    algo.stop()
    timed = rows[1:] or rows
    steps = sum(r["steps"] for r in timed)
    out = {
        "config": name,
        "iterations_timed": len(timed),
        "env_steps": steps,
        "sample_env_steps_per_s": steps / sum(r["sample_s"] for r in timed),
        "train_env_steps_per_s": steps / sum(r["wall"] for r in timed),
        "episode_return_mean": timed[-1]["return"],
    }
    if timed[0]["total_s"] is not None:
        total = sum(r["total_s"] for r in timed)
        env_s, pol_s = sum(r["env_s"] for r in timed), sum(r["policy_s"] for r in timed)
        out["sampler_breakdown"] = {
            "env_frac": env_s / total,
            "policy_frac": pol_s / total,
            "bookkeeping_frac": 1 - (env_s + pol_s) / total,
        }
    print(json.dumps(out, default=float), flush=True)
    return out


EPISODE_LEN, Q_BATCH = 25, 32  # simple_spread's episodes; PyMARL's batch of episodes


def rllib_dqn_config(seed: int = 0):
    """RLlib's multi-agent DQN on mpe2 simple_spread: one shared module, its episode replay,
    PyMARL's batch and update rate in transitions."""
    from mpe2 import simple_spread_v3
    from ray.rllib.algorithms.dqn import DQNConfig
    from ray.rllib.env.wrappers.pettingzoo_env import ParallelPettingZooEnv
    from ray.tune.registry import register_env

    register_env(
        "bench_dqn_spread", lambda cfg: ParallelPettingZooEnv(simple_spread_v3.parallel_env())
    )
    return (
        DQNConfig()
        .environment("bench_dqn_spread")
        .env_runners(num_env_runners=0)
        .multi_agent(policies={"shared"}, policy_mapping_fn=lambda *a, **k: "shared")
        .training(
            lr=5e-4,
            train_batch_size_per_learner=Q_BATCH * EPISODE_LEN,
            training_intensity=Q_BATCH,  # one update of 32 episodes' steps per episode sampled
            replay_buffer_config={"type": "MultiAgentEpisodeReplayBuffer", "capacity": 5000 * 25},
            num_steps_sampled_before_learning_starts=Q_BATCH * EPISODE_LEN,
        )
        .reporting(min_sample_timesteps_per_iteration=2000)
        .debugging(seed=seed)
    )


def arena_q_config(algo: str, recurrent: bool = True, seed: int = 0):
    from policies import algorithm

    info = algorithm.get(algo)
    settings = info.settings(test_interval=0)
    settings.model.recurrent = recurrent
    return info.build(ENV_ID, settings, seed=seed)


def measure_value(name: str, config, iterations: int, arena: bool) -> dict:
    """End-to-end env steps/s over whole iterations (after a warm-up one) and sampling env
    steps/s of the algorithm's own EnvRunner alone (2,000 env steps, exploring)."""
    algo = config.build_algo()
    runner = algo.env_runner
    t0 = time.perf_counter()
    if arena:
        steps = 0
        while steps < 2000:
            steps += runner.sample_episodes(20 * runner.num_envs, epsilon=1.0)[1]
    else:
        runner.sample(num_timesteps=2000, explore=True)
        steps = 2000
    sample_rate = steps / (time.perf_counter() - t0)
    algo.train()  # warm-up: fills the replay
    steps = wall = 0.0
    for _ in range(iterations):
        t0 = time.perf_counter()
        result = algo.train()
        wall += time.perf_counter() - t0
        steps += result["env_runners"]["num_env_steps_sampled"]
    algo.stop()
    out = {
        "config": name,
        "iterations_timed": iterations,
        "env_steps": steps,
        "sample_env_steps_per_s": sample_rate,
        "train_env_steps_per_s": steps / wall,
    }
    print(json.dumps(out, default=float), flush=True)
    return out


def value_based(iterations: int) -> None:
    rows = {
        "rllib_dqn": measure_value("rllib_dqn_multi_agent/simple_spread", rllib_dqn_config(), iterations, False),
        "arena_iql_mlp": measure_value("arena_iql_feed_forward/simple_spread", arena_q_config("iql", False), iterations, True),
        "arena_iql": measure_value("arena_iql_gru/simple_spread", arena_q_config("iql"), iterations, True),
        "arena_qmix": measure_value("arena_qmix_gru/simple_spread", arena_q_config("qmix"), iterations, True),
    }  # fmt: skip
    dqn = rows["rllib_dqn"]
    summary = {"summary": "value_based"}
    for key in ("arena_iql_mlp", "arena_iql", "arena_qmix"):
        summary[key] = {
            "sampling_speedup": rows[key]["sample_env_steps_per_s"] / dqn["sample_env_steps_per_s"],
            "training_speedup": rows[key]["train_env_steps_per_s"] / dqn["train_env_steps_per_s"],
        }
    print(json.dumps(summary), flush=True)


def jaxmarl_speed(python: str, extra: str, timeout: float) -> dict:
    """JaxMARL's IPPO row: ``bench/jaxmarl_ippo.py --speed`` in its own interpreter."""
    cmd = [python, str(BENCH / "jaxmarl_ippo.py"), "--speed", *shlex.split(extra)]
    env = {**os.environ, "JAX_PLATFORMS": os.environ.get("JAX_PLATFORMS", "cpu")}
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise SystemExit(f"JaxMARL's IPPO ran past {timeout:.0f} s: {shlex.join(cmd)}") from None
    rows = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    if proc.returncode != 0 or not rows:
        tail = " | ".join(proc.stderr.strip().splitlines()[-5:])
        raise SystemExit(
            f"JaxMARL's IPPO failed (exit {proc.returncode}): {shlex.join(cmd)}: {tail}"
        )
    row = json.loads(rows[-1])
    print(json.dumps(row), flush=True)
    return row


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--iterations", type=int, default=3)
    p.add_argument("--runners", default="0,1", help="EnvRunner counts to measure")
    p.add_argument("--value", action="store_true", help="the value-based rows only")
    p.add_argument("--smac", action="store_true", help="the MAPPO paper's SMAC rows only")
    p.add_argument(
        "--jaxmarl-python",
        default=str(JAXMARL_PYTHON) if JAXMARL_PYTHON.exists() else None,
        help="the jaxmarl venv's python, for JaxMARL's IPPO row (default: "
        "bench/.jaxmarl-venv/bin/python if it exists; `make jaxmarl-venv`)",
    )
    p.add_argument("--jaxmarl-args", default="", help="more flags for bench/jaxmarl_ippo.py")
    p.add_argument("--jaxmarl-timeout", type=float, default=900, help="seconds")
    args = p.parse_args()
    runner_counts = [int(x) for x in args.runners.split(",")]
    jaxmarl = None
    if not (args.value or args.smac):
        if args.jaxmarl_python is None:
            print("no JaxMARL row: no bench/.jaxmarl-venv (make jaxmarl-venv)", flush=True)
        elif not Path(args.jaxmarl_python).exists():
            p.error(f"--jaxmarl-python {args.jaxmarl_python}: no such file")
        else:  # first, alone on the CPU: before Ray starts
            jaxmarl = jaxmarl_speed(args.jaxmarl_python, args.jaxmarl_args, args.jaxmarl_timeout)

    from training import runtime

    runtime.connect(dashboard=False)
    if args.value or args.smac:
        (value_based if args.value else smac_paper)(args.iterations)
        runtime.shutdown()
        return
    results = {}
    for n in runner_counts:
        results[("default", n)] = measure(
            f"rllib_default/runners={n}",
            rllib_default_config("simple_spread_v3", n),
            args.iterations,
        )
        results[("arena", n)] = measure(
            f"arena_ippo/runners={n}", arena_config("ippo", n), args.iterations
        )
    results[("arena_mappo", 0)] = measure(
        "arena_mappo/runners=0", arena_config("mappo", 0), args.iterations
    )
    # The learner's input before the array path: episodes through RLlib's learner connectors.
    from ray.rllib.algorithms.ppo import PPO

    for algo in ("ippo", "mappo"):
        config = arena_config(algo, 0)
        config.algo_class = PPO
        results[(f"{algo}_episodes", 0)] = measure(
            f"arena_{algo}_episode_path/runners=0", config, args.iterations
        )
    # The floor: the same PPO as a bare single-file loop (bench/bare_ppo.py), one thread.
    from bare_ppo import train as bare_train

    for algo, critic in (("ippo", "local"), ("mappo", "central")):
        bare = bare_train(critic, BATCH * max(args.iterations, 5), seed=0, curve=False)
        print(json.dumps(bare), flush=True)
        results[(f"{algo}_bare", 0)] = bare
    results[("tag_default", 0)] = measure(
        "rllib_default_two_policies/simple_tag/runners=0",
        rllib_default_config("simple_tag_v3", 0, per_group=True),
        args.iterations,
    )
    results[("tag_arena", 0)] = measure(
        "arena_ippo_per_group/simple_tag/runners=0",
        arena_config("ippo", 0, env_id="mpe/simple_tag-v3", sharing="per_group"),
        args.iterations,
    )
    results[("rnn_default", 0)] = measure(
        "rllib_default_lstm/runners=0",
        rllib_default_config("simple_spread_v3", 0, recurrent=True),
        args.iterations,
    )
    results[("rnn_arena", 0)] = measure(
        "arena_mappo_gru/runners=0", arena_config("mappo", 0, recurrent=True), args.iterations
    )
    config = arena_config("mappo", 0, recurrent=True)
    config.algo_class = PPO
    results[("rnn_arena_episodes", 0)] = measure(
        "arena_mappo_gru_episode_path/runners=0", config, args.iterations
    )
    summary = {"summary": True}
    pairs = {f"runners={n}": (("default", n), ("arena", n)) for n in runner_counts}
    pairs["simple_tag_two_policies"] = (("tag_default", 0), ("tag_arena", 0))
    pairs["recurrent"] = (("rnn_default", 0), ("rnn_arena", 0))
    arena = {"ippo": results[("arena", 0)], "mappo": results[("arena_mappo", 0)]}
    for algo in ("ippo", "mappo"):
        fast = arena[algo]["train_env_steps_per_s"]
        summary[f"{algo}_vs_bare_loop"] = {
            "bare_over_arena": results[(f"{algo}_bare", 0)]["train_env_steps_per_s"] / fast,
            "array_path_speedup": fast / results[(f"{algo}_episodes", 0)]["train_env_steps_per_s"],
        }
    gru = results[("rnn_arena", 0)]["train_env_steps_per_s"]
    summary["mappo_gru"] = {
        "over_feed_forward": gru / arena["mappo"]["train_env_steps_per_s"],
        "arrays_over_episodes": gru / results[("rnn_arena_episodes", 0)]["train_env_steps_per_s"],
    }
    if jaxmarl is not None:
        rate = jaxmarl["env_steps_per_s"]
        summary["vs_jaxmarl"] = {
            "jaxmarl_env_steps_per_s": rate,
            "jaxmarl_compile_s": jaxmarl["compile_s"],
            "arena_ippo_over_jaxmarl": arena["ippo"]["train_env_steps_per_s"] / rate,
            "bare_ippo_over_jaxmarl": results[("ippo_bare", 0)]["train_env_steps_per_s"] / rate,
        }
    for label, (d_key, a_key) in pairs.items():
        d, a = results[d_key], results[a_key]
        summary[label] = {
            "sampling_speedup": a["sample_env_steps_per_s"] / d["sample_env_steps_per_s"],
            "training_speedup": a["train_env_steps_per_s"] / d["train_env_steps_per_s"],
            "bookkeeping_frac": a.get("sampler_breakdown", {}).get("bookkeeping_frac"),
        }
    print(json.dumps(summary), flush=True)
    runtime.shutdown()


if __name__ == "__main__":
    main()
