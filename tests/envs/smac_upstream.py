"""Prints the reference numbers of tests/envs/test_smac.py from SMAC's and SMACv2's own sources.

    python tests/envs/smac_upstream.py SMAC SMACV2   # checkouts of oxwhirl/smac, oxwhirl/smacv2
    python tests/envs/smac_upstream.py SMAC SMACV2 tests/envs/smacv2_obs.json

Not part of the test suite (it needs the two checkouts, and ``mpyq`` for the maps):

- observation / state sizes and ``n_actions``: upstream ``StarCraft2Env(map_name=...)``
  itself, default flags (SMACv2: the ``env_args`` of ``smacv2/examples/configs/
  sc2_gen_{race}.yaml`` with the README's ``n_units`` / ``n_enemies``), then
  ``get_obs_size()``, ``get_state_size()``, ``n_actions``. Constructing the env does not start
  StarCraft II, so the game's client libraries (pysc2, s2clientprotocol, absl) are stubbed.
- the same sizes with SMAC's ``obs_pathing_grid`` / ``obs_terrain_height`` /
  ``obs_instead_of_state`` and SMACv2's ``attack`` / ``health`` capabilities
  (``option_sizes``; test_smac_options.py's ``UPSTREAM_OPTION_SIZES``).
- observations and state of SMACv2's own ``get_obs`` / ``get_state`` on units copied from
  Arena battles (``OBS_CASES``: its enemy tagging bug, capabilities, surrounding grids),
  written to ``smacv2_obs.json`` for test_smac_options.py.
- map size: the ``MapInfo`` header inside each ``smac/env/starcraft2/maps/SMAC_Maps/*.SC2Map``
  (an MPQ archive): width, height and camera bounds.
"""

from __future__ import annotations

import glob
import json
import os
import struct
import sys
import types
from unittest import mock

import numpy as np
import yaml

STUBS = (
    "pysc2",
    "pysc2.maps",
    "pysc2.lib",
    "pysc2.lib.protocol",
    "pysc2.lib.units",
    "pysc2.run_configs",
    "s2clientprotocol",
    "s2clientprotocol.common_pb2",
    "s2clientprotocol.sc2api_pb2",
    "s2clientprotocol.raw_pb2",
    "s2clientprotocol.debug_pb2",
    "absl",
    "absl.logging",
)
V2_SCENARIOS = ((5, 5), (10, 10), (10, 11), (20, 20), (20, 23))


def stub_game_libraries() -> None:
    for name in STUBS:
        sys.modules[name] = mock.MagicMock()
    lib = types.ModuleType("pysc2.maps.lib")
    lib.Map = type("Map", (), {})  # the base class of SMAC's map classes
    sys.modules["pysc2.maps.lib"] = sys.modules["pysc2.maps"].lib = lib


def sizes(smac: str, smacv2: str) -> dict[str, tuple[int, int, int]]:
    stub_game_libraries()
    sys.path[:0] = [smac, smacv2]
    from smac.env.starcraft2.maps.smac_maps import map_param_registry
    from smac.env.starcraft2.starcraft2 import StarCraft2Env
    from smacv2.env.starcraft2.wrapper import StarCraftCapabilityEnvWrapper

    out = {}
    for name in map_param_registry:
        env = StarCraft2Env(map_name=name)
        out[name] = (env.get_obs_size(), env.get_state_size(), env.n_actions)
    for race in ("protoss", "terran", "zerg"):
        path = os.path.join(smacv2, "smacv2/examples/configs", f"sc2_gen_{race}.yaml")
        with open(path) as f:
            config = yaml.safe_load(f)["env_args"]
        for n_units, n_enemies in V2_SCENARIOS:
            args = yaml.safe_load(yaml.safe_dump(config))
            args["capability_config"].update(n_units=n_units, n_enemies=n_enemies)
            env = StarCraftCapabilityEnvWrapper(**args)
            out[f"{race}_{n_units}_vs_{n_enemies}"] = (
                env.get_obs_size(),
                env.get_state_size(),
                env.env.n_actions,
            )
    return out


# SMAC options whose sizes test_smac_options.py checks, and SMACv2's capability entries
# (per_agent_uniform bounds; SMACv2's configs give none, any bounds give the same sizes).
V1_OPTIONS = (
    {"obs_pathing_grid": True},
    {"obs_terrain_height": True},
    {"obs_pathing_grid": True, "obs_terrain_height": True, "obs_instead_of_state": True},
)
CAPABILITIES = {
    "attack": {"dist_type": "per_agent_uniform", "lower_bound": [0.5], "upper_bound": [1.0]},
    "health": {"dist_type": "per_agent_uniform", "lower_bound": [0.0], "upper_bound": [0.5]},
}


def option_sizes(smac: str, smacv2: str) -> list[tuple[str, dict, tuple[int, int]]]:
    """(map, SMAC options or SMACv2 capability_config additions, (obs size, state size))."""
    stub_game_libraries()
    sys.path[:0] = [smac, smacv2]
    from smac.env.starcraft2.starcraft2 import StarCraft2Env
    from smacv2.env.starcraft2.wrapper import StarCraftCapabilityEnvWrapper

    out = []
    for name in ("3m", "MMM2", "corridor"):
        for options in V1_OPTIONS:
            env = StarCraft2Env(map_name=name, **options)
            out.append((name, options, (env.get_obs_size(), env.get_state_size())))
    for race in ("protoss", "terran"):
        path = os.path.join(smacv2, "smacv2/examples/configs", f"sc2_gen_{race}.yaml")
        with open(path) as f:
            config = yaml.safe_load(f)["env_args"]
        for keys in (("attack",), ("health",), ("attack", "health")):
            for observe in (True, False):
                args = yaml.safe_load(yaml.safe_dump(config))
                caps = {k: dict(CAPABILITIES[k], observe=observe) for k in keys}
                args["capability_config"].update(caps)
                env = StarCraftCapabilityEnvWrapper(**args)
                sizes_ = (env.get_obs_size(), env.get_state_size())
                out.append((f"{race}_5_vs_5", {"observe": observe, "keys": keys}, sizes_))
    return out


# SMACv2 observation cases: a protoss_5_vs_5 battle of Arena's, placed by hand, observed by
# Arena and by SMACv2's own get_obs / get_state on a copy of the same units (smacv2_obs.json).
OBS_CASES = {
    "upstream_obs_bug": ({"upstream_obs_bug": True}, (), True, "blind_spot"),
    "default": ({}, (), True, "blind_spot"),
    "capabilities_and_grids": (
        {
            "stochastic_attack": (0.2, 0.9),
            "stochastic_health": (0.1, 0.4),
            "obs_pathing_grid": True,
            "obs_terrain_height": True,
        },
        ("attack", "health"),
        True,
        "mixed",
    ),
    "capabilities_not_observed": (
        {
            "stochastic_attack": (0.2, 0.9),
            "stochastic_health": (0.1, 0.4),
            "observe_attack_probs": False,
            "observe_teammate_health": False,
        },
        ("attack", "health"),
        False,
        "mixed",
    ),
    "upstream_obs_bug_health": (
        {"upstream_obs_bug": True, "stochastic_health": (0.1, 0.4)},
        ("health",),
        True,
        "mixed",
    ),
}
PLACES = {
    # Enemy 2 far from every agent; the others beside agent 0 only.
    "blind_spot": (
        [16 + 16j, 2 + 2j, 2 + 30j, 30 + 2j, 30 + 30j],
        [17 + 16j, 16 + 17j, 16 + 30j, 15 + 16j, 16 + 15j],
    ),
    # Agents 0-2 together, 3 and 4 near the map's corners; enemies around them.
    "mixed": (
        [16.3 + 16.7j, 17.5 + 15.2j, 14.1 + 18.9j, 1.5 + 30.2j, 30.5 + 1.2j],
        [18 + 16j, 16 + 20j, 12 + 16j, 20 + 20j, 2.5 + 28j],
    ),
}


class _TurnsInOrder:
    """Stands in for a battle's ``_obs_rng`` (and SMACv2's ``random.shuffle``): the agents take
    their turns in index order, and every draw is 0, so below any ``prob_obs_enemy``."""

    def __init__(self):
        self.turns = True

    def random(self, shape):
        shape = (shape,) if isinstance(shape, int) else tuple(shape)
        if self.turns and len(shape) == 2:
            self.turns = False
            return np.broadcast_to(np.arange(shape[1]) / shape[1], shape).copy()
        return np.zeros(shape)


def arena_case(name: str):
    """(battle, observations [A, D], state [S]) of Arena for ``OBS_CASES[name]``."""
    from envs.smac.core import BattleBatch

    options, _, _, place = OBS_CASES[name]
    core = BattleBatch(1, seed=4, map_name="protoss_5_vs_5", **options)
    core.reset()
    A = core.n_allies
    allies, enemies = PLACES[place]
    core.pos[0, :A], core.pos[0, A:] = allies, enemies
    core.hp[0] *= np.linspace(0.4, 1.0, core.n_units).astype(np.float32)
    core.sh[0] *= np.linspace(1.0, 0.2, core.n_units).astype(np.float32)
    core._refresh()
    core._obs_rng = _TurnsInOrder()
    core._spotter[:] = -1
    core._told_to[:] = not options.get("upstream_obs_bug", False)
    obs, state, _ = core._observe()
    return core, obs[0], state[0]


def upstream_case(name: str, smac: str, smacv2: str):
    """SMACv2's ``get_obs()`` and ``get_state()`` on the units of ``arena_case(name)``."""
    from envs.smac import terrain
    from envs.smac import units as U_

    stub_game_libraries()
    protoss = sys.modules["pysc2.lib.units"].Protoss
    protoss.Stalker, protoss.Zealot, protoss.Colossus = 74, 73, 4  # SC2's unit ids
    sys.path[:0] = [smac, smacv2]
    import smacv2.env.starcraft2.starcraft2 as sc2
    from smacv2.env.starcraft2.wrapper import StarCraftCapabilityEnvWrapper

    options, caps, observe, _ = OBS_CASES[name]
    core, _, _ = arena_case(name)
    path = os.path.join(smacv2, "smacv2/examples/configs/sc2_gen_protoss.yaml")
    with open(path) as f:
        args = yaml.safe_load(f)["env_args"]
    for key in caps:
        args["capability_config"][key] = dict(CAPABILITIES[key], observe=observe)
    for key in ("obs_pathing_grid", "obs_terrain_height"):
        args[key] = options.get(key, False)
    env = StarCraftCapabilityEnvWrapper(**args).env
    env._controller = mock.MagicMock()
    env._controller.data.return_value.units = [None] * 2000
    env._init_ally_unit_types(0)
    ally_ids = {"stalker": env.stalker_id, "zealot": env.zealot_id, "colossus": env.colossus_id}
    enemy_ids = {"stalker": 74, "zealot": 73, "colossus": 4}
    A = core.n_allies

    def unit(i, ids):
        z = core.pos[0, i] if core.alive[0, i] else core.death_pos[0, i]
        return types.SimpleNamespace(
            pos=types.SimpleNamespace(x=float(z.real), y=float(z.imag)),
            health=float(core.hp[0, i]),
            health_max=float(core.hp_max[0, i]),
            shield=float(core.sh[0, i]),
            unit_type=ids[U_.UNIT_TYPES[int(core.types[0, i])].name],
            weapon_cooldown=0.0,
            energy=0.0,
        )

    env.agents = {a: unit(a, ally_ids) for a in range(A)}
    env.enemies = {e: unit(A + e, enemy_ids) for e in range(core.n_enemies)}
    env.pathing_grid = terrain.pathable(core.spec.terrain)
    env.terrain_height = terrain.height(core.spec.terrain).astype(np.float64)
    env.map_x = env.map_y = env.max_distance_x = env.max_distance_y = 32
    told = not options.get("upstream_obs_bug", False)  # Arena's default: everyone told
    env.obs_enemies = np.full((core.n_enemies, A), float(told))
    env.enemy_tags = [0 if told else None] * core.n_enemies
    env.agent_attack_probabilities = core.attack_prob[0].astype(np.float64)
    env.agent_health_levels = core.health_level[0].astype(np.float64)
    env._episode_steps = 0
    sc2.random.shuffle = lambda agents: None  # turns in index order, as _TurnsInOrder
    sc2.np.random.rand = lambda: 0.0
    return np.array(env.get_obs(), np.float32), np.asarray(env.get_state(), np.float32)


def _string(data: bytes, i: int) -> tuple[str, int]:
    end = data.index(b"\0", i)
    return data[i:end].decode(), end + 1


def map_info(path: str) -> tuple[int, int, tuple[int, int, int, int]]:
    """(width, height, camera bounds (left, bottom, right, top)) of a .SC2Map's MapInfo."""
    import mpyq

    data = mpyq.MPQArchive(path).read_file("MapInfo")
    assert data[:4] == b"IpaM", path
    (version,) = struct.unpack_from("<I", data, 4)
    i = 16 if version >= 0x18 else 8
    width, height = struct.unpack_from("<II", data, i)
    i += 8
    for _ in range(2):  # small and large preview: a type, and a path when the type is 2
        (kind,) = struct.unpack_from("<I", data, i)
        i += 4
        if kind == 2:
            _, i = _string(data, i)
    for _ in range(2 if version >= 0x26 else 1 if version >= 0x1F else 0):
        _, i = _string(data, i)
    i += 8 if version >= 0x26 else 4
    fog, i = _string(data, i)
    _tileset, i = _string(data, i)
    assert fog == "Dark", (path, fog)  # the parse stayed in step
    return width, height, struct.unpack_from("<IIII", data, i)


def main(argv: list[str]) -> int:
    smac, smacv2, *out = argv
    if out:  # SMACv2's observations of OBS_CASES, for test_smac_options.py
        cases = {}
        for name in OBS_CASES:
            obs, state = upstream_case(name, smac, smacv2)
            cases[name] = {"obs": obs.round(7).tolist(), "state": state.round(7).tolist()}
        with open(out[0], "w") as f:
            json.dump(cases, f)
        return 0
    for name, (obs, state, n_actions) in sizes(smac, smacv2).items():
        print(f'    "{name}": ({obs}, {state}, {n_actions}),')
    for name, options, (obs, state) in option_sizes(smac, smacv2):
        print(f"    ({name!r}, {options!r}, ({obs}, {state})),")
    maps = os.path.join(smac, "smac/env/starcraft2/maps/SMAC_Maps/*.SC2Map")
    for path in sorted(glob.glob(maps)):
        print(os.path.basename(path), *map_info(path))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
