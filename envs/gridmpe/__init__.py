"""ODIS's cooperative navigation on a grid: ``grid_mpe`` of Zhang et al., "Discovering
Generalizable Multi-agent Coordination Skills from Multi-task Offline Data" (ICLR 2023), the
MPE task set of ODIS's and BiKT's offline multi-task benchmarks, as a vectorised NumPy port
(``envs.gridmpe.core``).

``gridmpe/cn-v0``: N agents and N landmarks on a grid; the team scores 1 and the episode ends
when every landmark lies within 2 cells (in both rows and columns) of a different agent.
``map_name`` picks ODIS's task, ``cn-2`` (the default) to ``cn-15``: the number of agents,
the grid (6x6 for two agents to 20x20 for fifteen), the sight and the episode limit.

Version history: v0 = the first version.
"""

from envs.registry import register


def _validate(cfg: dict) -> None:
    from envs.gridmpe.core import GridSpreadOptions

    GridSpreadOptions(**{k: v for k, v in cfg.items() if k == "map_name"})


register(
    "gridmpe/cn-v0",
    "envs.gridmpe.core:GridSpreadEnv",  # imported on first use
    vector="envs.gridmpe.core:GridSpreadBatch",
    description="ODIS's grid cooperative navigation: N agents cover N landmarks (map_name)",
    validate=_validate,
)
