"""Records ODIS's own grid cooperative navigation (``GridMPEEnv``, ``default_task: True``) for
tests/envs/test_gridmpe.py to replay on Arena's port.

    python tests/envs/gridmpe_upstream.py ODIS tests/envs/gridmpe_upstream.json

ODIS is a checkout of github.com/LAMDA-RL/ODIS (5f943fa) with ``munkres`` importable (its
``utils.matched`` uses it). Not part of the test suite (it runs upstream's code). For each case
(a map and a seed) it plays episodes of seeded uniformly random actions over all five (masked
moves included: upstream plays them as stay) and writes the start (agents, landmarks,
observations, state, available actions) and, per step, the actions, the team reward,
``done`` and ``battle_won``, and the agents, observations and available actions after it.
A few cases start from hand-placed positions (the agents beside the landmarks), so that the
recorded episodes also hold successes on the larger maps.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import types

import numpy as np

CASES = (("cn-2", 0, None), ("cn-2", 1, None), ("cn-3", 2, None), ("cn-4", 3, "near"),
         ("cn-5", 4, "near"), ("cn-4", 5, None))  # fmt: skip
EPISODES = 3


def load(odis: str):
    """ODIS's ``grid_mpe`` module; its ``envs.multiagentenv`` import gets a stand-in base."""
    base = types.ModuleType("envs.multiagentenv")
    base.MultiAgentEnv = object
    sys.modules["envs"] = types.ModuleType("envs")
    sys.modules["envs.multiagentenv"] = base
    pkg = f"{odis}/src/envs/grid_mpe"
    spec = importlib.util.spec_from_file_location(
        "grid_mpe", f"{pkg}/__init__.py", submodule_search_locations=[pkg]
    )
    module = importlib.util.module_from_spec(spec)
    sys.modules["grid_mpe"] = module
    spec.loader.exec_module(module)
    return sys.modules["grid_mpe.grid_mpe"]


def play(gm, map_name: str, seed: int, start: str | None) -> list[dict]:
    env = gm.GridMPEEnv(
        n_agents=2,
        field_size=[6, 6],
        sight=5,
        episode_limit=50,
        reach_range=2,
        seed=seed,
        default_task=True,
        map_name=map_name,
    )  # fmt: skip  (cn_offline.yaml's env_args; default_task takes the map's own)
    rng = np.random.default_rng(seed)
    episodes = []
    for _ in range(EPISODES):
        env.reset()
        if start == "near":  # each agent two rows below its landmark, where the grid allows
            for p, (r, c) in zip(env.players, env.landmark_locs, strict=True):
                p.position = (min(r + 2, env.rows - 1), c) if r + 2 < env.rows else (r - 2, c)
            env._gen_valid_moves()
        ep = {
            "map": map_name,
            "agents": [list(map(int, p.position)) for p in env.players],
            "landmarks": [list(map(int, x)) for x in env.landmark_locs],
            "obs": np.stack(env.get_obs()).tolist(),
            "state": env.get_state().tolist(),
            "avail": env.get_avail_actions(),
            "steps": [],
        }
        done = False
        while not done:
            actions = rng.integers(0, 5, env.n_agents).tolist()
            reward, done, info = env.step(actions)
            ep["steps"].append(
                {
                    "actions": actions,
                    "reward": reward,
                    "done": bool(done),
                    "won": bool(info["battle_won"]),
                    "agents": [list(map(int, p.position)) for p in env.players],
                    "obs": np.stack(env.get_obs()).tolist(),
                    "avail": env.get_avail_actions(),
                }
            )
        episodes.append(ep)
    return episodes


def main() -> None:
    odis, out = sys.argv[1], sys.argv[2]
    gm = load(odis)
    cases = [ep for m, seed, start in CASES for ep in play(gm, m, seed, start)]
    with open(out, "w") as f:
        json.dump({"source": "github.com/LAMDA-RL/ODIS@5f943fa", "episodes": cases}, f)
    won = sum(ep["steps"][-1]["won"] for ep in cases)
    print(f"{len(cases)} episodes, {sum(len(e['steps']) for e in cases)} steps, {won} won")


if __name__ == "__main__":
    main()
