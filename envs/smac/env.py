"""The PettingZoo face of a SMAC battle: one battle (B = 1) of the vectorised core."""

from __future__ import annotations

from envs.smac.core import BattleBatch, BattleOptions
from envs.vector import CoreEnv


class SMACEnv(CoreEnv):
    """A SMAC (or SMACv2) battle with SMAC's interface: dict observations with action masks,
    ``state()`` for centralised critics, ``info`` with ``battle_won``, ``dead_allies``,
    ``dead_enemies`` and ``episode_limit`` when the episode ends.

    Args:
        map_name: e.g. ``"3m"``, ``"MMM2"``, ``"protoss_5_vs_5"``.
        render_mode: ``"rgb_array"`` or None.
        options: SMAC's environment options (``envs.smac.core.BattleOptions``), e.g.
            ``reward_sparse=True`` or ``obs_last_action=True``.
    """

    core_class = BattleBatch
    options = BattleOptions

    metadata = {
        "name": "smac",
        "render_modes": ["rgb_array"],
        "is_parallelizable": True,
        "render_fps": 8,
    }

    def __init__(self, map_name: str = "3m", render_mode=None, **options):
        super().__init__(render_mode, map_name=map_name, **options)
        self.map_name = map_name
        self.metadata = {**self.metadata, "name": f"smac_{map_name}"}

    def render(self):
        from envs.smac.render import frame

        return frame(self.core, 0)
