"""Prints the reference numbers of tests/envs/test_smac.py from SMAC's and SMACv2's own sources.

    python tests/envs/smac_upstream.py SMAC SMACV2   # checkouts of oxwhirl/smac, oxwhirl/smacv2

Not part of the test suite (it needs the two checkouts, and ``mpyq`` for the maps):

- observation / state sizes and ``n_actions``: upstream ``StarCraft2Env(map_name=...)``
  itself, default flags (SMACv2: the ``env_args`` of ``smacv2/examples/configs/
  sc2_gen_{race}.yaml`` with the README's ``n_units`` / ``n_enemies``), then
  ``get_obs_size()``, ``get_state_size()``, ``n_actions``. Constructing the env does not start
  StarCraft II, so the game's client libraries (pysc2, s2clientprotocol, absl) are stubbed.
- the same sizes with SMAC's ``obs_pathing_grid`` / ``obs_terrain_height`` /
  ``obs_instead_of_state`` and SMACv2's ``attack`` / ``health`` capabilities
  (``option_sizes``; test_smac_options.py's ``UPSTREAM_OPTION_SIZES``).
- map size: the ``MapInfo`` header inside each ``smac/env/starcraft2/maps/SMAC_Maps/*.SC2Map``
  (an MPQ archive): width, height and camera bounds.
"""

from __future__ import annotations

import glob
import os
import struct
import sys
import types
from unittest import mock

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
    smac, smacv2 = argv
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
