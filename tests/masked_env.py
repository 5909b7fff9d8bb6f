"""A tiny ParallelEnv with action masks, for tests of the masking path.

Two agents walk on a line of 5 cells; action 0 stays, 1 steps left, 2 steps right; a step
off the line is illegal (masked). Each agent gets +1 per step on the rightmost cell.
"""

import functools

import gymnasium as gym
import numpy as np
from pettingzoo import ParallelEnv


class OneSpaceEnv(ParallelEnv):
    """A test env whose agents all share one observation and one action space
    (``self._obs_space``, ``self._act_space``): the same objects on every call, as
    PettingZoo's API test wants."""

    @functools.cache  # noqa: B019 - one space object per agent
    def observation_space(self, agent):
        return self._obs_space

    @functools.cache  # noqa: B019
    def action_space(self, agent):
        return self._act_space


class MaskedGrid(OneSpaceEnv):
    metadata = {
        "name": "masked_grid_v0",
        "render_modes": ["rgb_array"],
        "is_parallelizable": True,
        "render_fps": 4,
    }

    def __init__(self, size: int = 5, max_steps: int = 10, render_mode=None):
        self.size, self.max_steps, self.render_mode = size, max_steps, render_mode
        self.possible_agents = ["a0", "a1"]
        self._obs_space = gym.spaces.Dict(
            {
                "observations": gym.spaces.Box(0.0, 1.0, (size,), np.float32),
                "action_mask": gym.spaces.Box(0, 1, (3,), np.int8),
            }
        )
        self._act_space = gym.spaces.Discrete(3)

    def _obs(self, agent):
        x = np.zeros(self.size, np.float32)
        x[self.pos[agent]] = 1.0
        mask = np.ones(3, np.int8)
        mask[1] = self.pos[agent] > 0
        mask[2] = self.pos[agent] < self.size - 1
        return {"observations": x, "action_mask": mask}

    def reset(self, seed=None, options=None):
        if seed is not None or not hasattr(self, "np_random"):
            self.np_random = np.random.default_rng(seed)
        self.agents = list(self.possible_agents)
        self.pos = {a: int(self.np_random.integers(self.size)) for a in self.agents}
        self.t = 0
        return {a: self._obs(a) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        for a, act in actions.items():
            legal = np.flatnonzero(self._obs(a)["action_mask"])
            if int(act) not in legal:
                raise ValueError(f"agent {a}: action {act} is illegal; legal: {legal.tolist()}")
            self.pos[a] += {0: 0, 1: -1, 2: 1}[int(act)]
        self.t += 1
        rewards = {a: float(self.pos[a] == self.size - 1) for a in self.agents}
        done = self.t >= self.max_steps
        obs = {a: self._obs(a) for a in self.agents}
        terms = {a: False for a in self.agents}
        truncs = {a: done for a in self.agents}
        infos = {a: {"reward_goal": rewards[a]} for a in self.agents}
        if done:
            self.agents = []
        return obs, rewards, terms, truncs, infos

    def state(self):
        return np.concatenate([self._obs(a)["observations"] for a in self.possible_agents])

    def render(self):
        img = np.zeros((16, 16 * self.size, 3), np.uint8)
        for i, a in enumerate(self.possible_agents):
            img[8 * i : 8 * i + 8, 16 * self.pos[a] : 16 * self.pos[a] + 16, i] = 255
        return img


class ImageGrid(OneSpaceEnv):
    """Two agents on a line of ``size`` cells, each seeing an 8 x 8 RGB uint8 picture of its
    cell; +1 per step on the rightmost cell. The global state is the two positions (not the
    pictures): a test of image observations."""

    metadata = {
        "name": "image_grid_v0",
        "render_modes": ["rgb_array"],
        "is_parallelizable": True,
        "render_fps": 4,
    }

    def __init__(self, size: int = 4, max_steps: int = 10, render_mode=None):
        self.size, self.max_steps, self.render_mode = size, max_steps, render_mode
        self.possible_agents = ["b0", "b1"]
        self._obs_space = gym.spaces.Box(0, 255, (8, 8, 3), np.uint8)
        self._act_space = gym.spaces.Discrete(3)

    def _obs(self, agent):
        img = np.zeros((8, 8, 3), np.uint8)
        img[:, 2 * self.pos[agent] : 2 * self.pos[agent] + 2, self.possible_agents.index(agent)] = (
            255
        )
        return img

    def reset(self, seed=None, options=None):
        if seed is not None or not hasattr(self, "np_random"):
            self.np_random = np.random.default_rng(seed)
        self.agents = list(self.possible_agents)
        self.pos = {a: int(self.np_random.integers(self.size)) for a in self.agents}
        self.t = 0
        return {a: self._obs(a) for a in self.agents}, {a: {} for a in self.agents}

    def step(self, actions):
        for a, act in actions.items():
            self.pos[a] = int(
                np.clip(self.pos[a] + {0: 0, 1: -1, 2: 1}[int(act)], 0, self.size - 1)
            )
        self.t += 1
        rewards = {a: float(self.pos[a] == self.size - 1) for a in self.agents}
        done = self.t >= self.max_steps
        obs = {a: self._obs(a) for a in self.agents}
        terms = {a: False for a in self.agents}
        truncs = {a: done for a in self.agents}
        infos = {a: {} for a in self.agents}
        if done:
            self.agents = []
        return obs, rewards, terms, truncs, infos

    def state(self):
        return np.array([self.pos[a] / self.size for a in self.possible_agents], np.float32)

    def render(self):
        return np.concatenate([self._obs(a) for a in self.possible_agents], axis=1)


class Recall(OneSpaceEnv):
    """Two agents each see a random cue (one of two) at the first step only, zeros after;
    every later step pays +1 for the action equal to the agent's cue. A feed-forward policy
    cannot tell the cue after the first step, so it scores what random does (``max_steps - 1``
    per episode over both agents, in expectation); one that remembers it scores twice that."""

    metadata = {
        "name": "recall_v0",
        "render_modes": ["rgb_array"],
        "is_parallelizable": True,
        "render_fps": 4,
    }

    def __init__(self, max_steps: int = 8, render_mode=None):
        self.max_steps, self.render_mode = max_steps, render_mode
        self.possible_agents = ["r_0", "r_1"]
        self._obs_space = gym.spaces.Box(0.0, 1.0, (2,), np.float32)
        self._act_space = gym.spaces.Discrete(2)

    def reset(self, seed=None, options=None):
        if seed is not None or not hasattr(self, "np_random"):
            self.np_random = np.random.default_rng(seed)
        self.agents = list(self.possible_agents)
        self.cue = {a: int(self.np_random.integers(2)) for a in self.agents}
        self.t = 0
        obs = {a: np.eye(2, dtype=np.float32)[self.cue[a]] for a in self.agents}
        self.last = obs
        return obs, {a: {} for a in self.agents}

    def step(self, actions):
        self.t += 1  # the first action (taken while the cue shows) pays nothing
        rewards = {a: float(self.t > 1 and int(actions[a]) == self.cue[a]) for a in self.agents}
        done = self.t >= self.max_steps
        obs = {a: np.zeros(2, np.float32) for a in self.agents}
        terms = {a: False for a in self.agents}
        truncs = {a: done for a in self.agents}
        infos = {a: {} for a in self.agents}
        self.last = obs
        if done:
            self.agents = []
        return obs, rewards, terms, truncs, infos

    def state(self):
        """The agents' observations side by side (what a vector env would use without it)."""
        return np.concatenate([self.last[a] for a in self.possible_agents])

    def render(self):
        """A row per agent: the cue's column lit while it shows."""
        img = np.zeros((8 * len(self.possible_agents), 16, 3), np.uint8)
        for i, a in enumerate(self.possible_agents):
            if self.last[a].max() > 0:
                c = int(np.argmax(self.last[a]))
                img[8 * i : 8 * i + 8, 8 * c : 8 * c + 8, 1] = 255
        return img
