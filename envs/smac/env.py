"""The PettingZoo face of a SMAC battle: one battle (B = 1) of the vectorised core."""

from __future__ import annotations

import functools

import gymnasium as gym
import numpy as np
from pettingzoo import ParallelEnv

from envs.smac.core import BattleBatch, BattleOptions


class SMACEnv(ParallelEnv):
    """A SMAC (or SMACv2) battle with SMAC's interface: dict observations with action masks,
    ``state()`` for centralised critics, ``info`` with ``battle_won``, ``dead_allies``,
    ``dead_enemies`` and ``episode_limit`` when the episode ends.

    Args:
        map_name: e.g. ``"3m"``, ``"MMM2"``, ``"protoss_5_vs_5"``.
        render_mode: ``"rgb_array"`` or None.
        options: SMAC's environment options (``envs.smac.core.BattleOptions``), e.g.
            ``reward_sparse=True`` or ``obs_last_action=True``.
    """

    options = BattleOptions

    metadata = {
        "name": "smac",
        "render_modes": ["rgb_array"],
        "is_parallelizable": True,
        "render_fps": 8,
    }

    def __init__(self, map_name: str = "3m", render_mode=None, **options):
        if render_mode not in (None, "rgb_array"):
            raise ValueError(f"render_mode {render_mode!r} is not supported; use 'rgb_array'")
        self.core = BattleBatch(1, map_name=map_name, auto_reset=False, **options)
        self.map_name, self.render_mode = map_name, render_mode
        self.metadata = {**self.metadata, "name": f"smac_{map_name}"}
        self.possible_agents = list(self.core.agents)
        self.agents: list[str] = []
        self._obs_space = gym.spaces.Dict(
            {
                "observations": self.core.observation_space,
                "action_mask": gym.spaces.Box(0, 1, (self.core.n_actions,), np.int8),
            }
        )
        self._step = None

    @functools.cache  # noqa: B019 - one space object per agent
    def observation_space(self, agent):
        return self._obs_space

    @functools.cache  # noqa: B019
    def action_space(self, agent):
        return self.core.action_space

    def _obs(self, step) -> dict:
        mask = step.action_mask["agent"][0].astype(np.int8)
        return {
            a: {"observations": step.obs["agent"][0, i], "action_mask": mask[i]}
            for i, a in enumerate(self.possible_agents)
        }

    def reset(self, seed=None, options=None):
        self._step = self.core.reset(seed=seed)
        self.agents = list(self.possible_agents)
        return self._obs(self._step), {a: {} for a in self.agents}

    def step(self, actions):
        if not self.agents:
            raise RuntimeError("the episode is over; call reset()")
        missing = [a for a in self.agents if a not in actions]
        if missing:
            raise ValueError(f"no action for agents {missing}; every agent acts every step")
        act = np.array([[int(actions[a]) for a in self.possible_agents]])
        step = self._step = self.core.step(act)
        obs = self._obs(step)
        term, trunc = bool(step.terminated[0]), bool(step.truncated[0])
        rewards = {a: float(step.rewards[0, i]) for i, a in enumerate(self.possible_agents)}
        infos = {a: {} for a in self.agents}
        if term or trunc:
            facts = {k: v[0].item() for k, v in step.info.items()}
            infos = {a: dict(facts) for a in self.agents}
        terms = dict.fromkeys(self.agents, term)
        truncs = dict.fromkeys(self.agents, trunc)
        if term or trunc:
            self.agents = []
        return obs, rewards, terms, truncs, infos

    def state(self) -> np.ndarray:
        return self._step.state[0]

    def render(self):
        from envs.smac.render import frame

        return frame(self.core, 0)

    def close(self):
        pass
