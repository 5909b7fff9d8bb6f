"""SMAC battles on a vectorised NumPy re-implementation of SMAC's micromanagement game.

Every SMAC v1 map (and the marine maps ODIS adds for its multi-task sets) is
``smac/<map>-v0`` and every SMACv2 scenario
``smacv2/<race>_<N>_vs_<M>-v0``; keyword arguments of ``envs.make`` are SMAC's options
(``envs.smac.core.BattleOptions``).
The interface (actions, masks, observation and state features, reward, episode limit) is
SMAC's; the mechanics and their sources are described in ``envs.smac.core``.

Version history: v0 = the first version.
"""

from envs.registry import register
from envs.smac.maps import SMACV2_SCENARIOS, V1_MAPS

ENV = "envs.smac.env:SMACEnv"  # imported on first use
CORE = "envs.smac.core:BattleBatch"

for _name, _spec in V1_MAPS.items():
    register(
        f"smac/{_name}-v0",
        ENV,
        vector=CORE,
        description=f"SMAC {_name}: {_spec.n_allies} vs {_spec.n_enemies}, limit {_spec.limit}",
        map_name=_name,
    )
for _name, _spec in SMACV2_SCENARIOS.items():
    register(
        f"smacv2/{_name}-v0",
        ENV,
        vector=CORE,
        description=f"SMACv2 {_name}, procedural, limit {_spec.limit}",
        map_name=_name,
    )
