"""MPE: the Multi-Particle Environments of the ``mpe2`` package, used as mpe2 ships them.

Every scenario is registered twice: ``mpe/<scenario>-vN`` with discrete actions and
``mpe/<scenario>_continuous-vN`` with continuous ones, where N is mpe2's own version of the
scenario. Keyword arguments of ``envs.make`` go to mpe2's ``parallel_env`` unchanged
(``N``, ``local_ratio``, ``max_cycles``, ...).

Scenarios with a vectorised NumPy core (``envs.mpe.batched``) train on it; a test proves it
equal to mpe2 step by step.

Two VMAS scenarios live beside them as NumPy cores of their own (``envs.mpe.vmas``), the tasks
that separate shared from specialised policies (HyperMARL): ``mpe/dispersion-v0``,
``mpe/navigation-v0`` (one goal for all agents) and ``mpe/vmas_navigation-v0`` (VMAS's
defaults: a goal per agent, collisions, lidar; ``env.agents_with_same_goal``,
``env.split_goals`` give the shared and half-shared goals), each with a ``_continuous`` twin.

Version history: v3 (v1 for collect_treasure, simple_formation, simple_line; v4 for
simple_speaker_listener) = mpe2 1.1.
"""

from envs.registry import register

# scenario -> (mpe2 module version, vectorised core or None)
SCENARIOS = {
    "collect_treasure": (1, None),
    "simple": (3, None),
    "simple_adversary": (3, None),
    "simple_crypto": (3, None),
    "simple_formation": (1, None),
    "simple_line": (1, None),
    "simple_push": (3, None),
    "simple_reference": (3, None),
    "simple_speaker_listener": (4, None),
    "simple_spread": (3, "envs.mpe.batched:SpreadBatch"),
    "simple_tag": (3, None),
    "simple_world_comm": (3, None),
}


# Counts mpe2 takes without complaint but that cannot make an episode (a negative length), or
# that exhaust memory before the first step (mpe2 keeps N x N arrays: N=100,000 asks 447 GiB).
MAX_ENTITIES = 100
_COUNTS = {
    "max_cycles": (1, 1_000_000),
    "N": (1, MAX_ENTITIES),
    "num_good": (1, MAX_ENTITIES),
    "num_adversaries": (1, MAX_ENTITIES),
    "num_obstacles": (0, MAX_ENTITIES),
    "num_food": (0, MAX_ENTITIES),
    "num_forests": (0, MAX_ENTITIES),
    "num_collectors": (1, MAX_ENTITIES),
    "num_deposits": (1, MAX_ENTITIES),
    "num_treasures": (1, MAX_ENTITIES),
    "num_agent_neighbors": (1, MAX_ENTITIES),
    "num_landmark_neighbors": (1, MAX_ENTITIES),
}


def _validate(cfg: dict) -> None:
    for key, (least, most) in _COUNTS.items():
        if key not in cfg or (cfg[key] is None and key.endswith("_neighbors")):  # None: all
            continue
        value = cfg[key]
        if isinstance(value, bool) or not isinstance(value, int) or not least <= value <= most:
            raise ValueError(f"{key} must be an integer in {least}..{most}, got {value!r}")


for _name, (_version, _vector) in SCENARIOS.items():
    _make = f"envs.mpe.scenarios:{_name}_v{_version}"  # imported on first use
    register(
        f"mpe/{_name}-v{_version}",
        _make,
        vector=_vector,
        description=f"mpe2 {_name}, discrete",
        validate=_validate,
    )
    register(
        f"mpe/{_name}_continuous-v{_version}",
        _make,
        vector=_vector,
        description=f"mpe2 {_name}, continuous",
        validate=_validate,
        continuous_actions=True,
    )


for _name, _env, _options in (
    ("dispersion", "DispersionEnv", "DispersionOptions"),
    ("navigation", "NavigationEnv", "NavigationOptions"),
    ("vmas_navigation", "VMASNavigationEnv", "VMASNavigationOptions"),
):
    for _suffix, _fixed in (("", {}), ("_continuous", {"continuous_actions": True})):
        register(
            f"mpe/{_name}{_suffix}-v0",
            f"envs.mpe.vmas:{_env}",
            vector=f"envs.mpe.vmas:{_env[:-3]}Batch",
            description=f"VMAS {_name} (NumPy core), {'continuous' if _fixed else 'discrete'}",
            validate=lambda cfg, _o=_options: _vmas_validate(_o, cfg),
            **_fixed,
        )


def _vmas_validate(options: str, cfg: dict) -> None:
    from envs.mpe import vmas

    vmas.validator(getattr(vmas, options))(cfg)
