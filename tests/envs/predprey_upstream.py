"""Records DCG's own predator-prey (``StagHunt`` with ``rel_overgen.yaml``) for
tests/envs/test_predprey.py to replay on Arena's port.

    python tests/envs/predprey_upstream.py DCG tests/envs/predprey_upstream.json

DCG is a checkout of github.com/wendelinboehmer/dcg (4de100c). Not part of the test suite (it
runs upstream's code; ``pygame``, which only its renderer uses, is stubbed). For each case
(a seed and a punishment) it plays one episode of 200 steps of seeded random legal actions
(catch with probability 0.4 where legal) and writes, per step: the actions, upstream's random
draws (the predators' and the prey's orders, and each fleeing prey's ``randint(n)``: the prey,
``n`` and the draw), the team reward, ``terminated`` and ``episode_limit``, and the
observations, state and available actions after the step, bit-packed as hex. The start
(positions, observations, state, available actions) comes first.
"""

from __future__ import annotations

import json
import sys
import types

import numpy as np

CASES = ((5, -2.0), (3, 0.0))


def pack(a) -> str:
    a = np.asarray(a)
    assert set(np.unique(a)) <= {0, 1}
    return np.packbits(a.astype(np.uint8).ravel()).tobytes().hex()


def record(dcg: str, seed: int, punishment: float) -> dict:
    import torch as th
    import yaml

    sys.path.insert(0, f"{dcg}/src")
    sys.modules.setdefault("pygame", types.ModuleType("pygame"))
    if not hasattr(np.random, "random_integers"):  # removed in NumPy 2; upstream's reset uses it
        np.random.random_integers = lambda low, high, size: np.random.randint(low, high + 1, size)
    from envs.stag_hunt import StagHunt

    with open(f"{dcg}/src/config/envs/rel_overgen.yaml") as f:
        cfg = yaml.safe_load(f)["env_args"]
    cfg["miscapture_punishment"] = punishment
    np.random.seed(seed)
    env = StagHunt(**cfg)
    log = {"on": False, "perms": [], "moves": [], "at": None}
    perm, randint, move = np.random.permutation, np.random.randint, env._move_actor

    def spy_perm(n):
        r = perm(n)
        if log["on"]:
            log["perms"].append(r.tolist())
        return r

    def spy_randint(*a, **k):
        r = randint(*a, **k)
        if log["on"]:  # a prey's flight: the prey last probed by _move_actor
            log["moves"].append([log["at"], int(a[0]), int(r)])
        return r

    def spy_move(pos, *a, **k):
        hit = np.flatnonzero((env.prey[:, 0] == pos).all(axis=1) & (env.prey_alive[:, 0] > 0))
        if hit.size:
            log["at"] = int(hit[0])
        return move(pos, *a, **k)

    np.random.permutation, np.random.randint, env._move_actor = spy_perm, spy_randint, spy_move
    try:
        obs, state = env.reset()
        out = {
            "seed": seed,
            "miscapture_punishment": punishment,
            "agents": env.agents[:, 0].tolist(),
            "prey": env.prey[:, 0].tolist(),
            "obs": pack(obs),
            "state": pack(state),
            "avail": pack(env.get_avail_actions()),
            "steps": [],
        }
        rng = np.random.default_rng(seed + 1000)
        for _ in range(cfg["episode_limit"]):
            avail = np.asarray(env.get_avail_actions())
            acts = [
                5
                if avail[a, 5] and rng.random() < 0.4
                else int(rng.choice(np.flatnonzero(avail[a])))
                for a in range(env.n_agents)
            ]
            log.update(on=True, perms=[], moves=[])
            reward, terminated, info = env.step(th.tensor(acts))
            log["on"] = False
            out["steps"].append(
                {
                    "actions": acts,
                    "order": log["perms"],
                    "moves": log["moves"],
                    "reward": float(reward),
                    "terminated": bool(terminated),
                    "episode_limit": bool(info["episode_limit"]),
                    "obs": pack(env.get_obs()),
                    "state": pack(env.get_state()),
                    "avail": pack(env.get_avail_actions()),
                }
            )
            if terminated:
                break
        return out
    finally:
        np.random.permutation, np.random.randint = perm, randint


if __name__ == "__main__":
    dcg, path = sys.argv[1], sys.argv[2]
    cases = [record(dcg, s, p) for s, p in CASES]
    with open(path, "w") as f:
        json.dump(cases, f, separators=(",", ":"))
    for c in cases:
        print(c["seed"], c["miscapture_punishment"], sum(s["reward"] for s in c["steps"]))
