"""The adapter from an Arena env (a PettingZoo ``ParallelEnv``) to RLlib's ``MultiAgentEnv``.

Observations pass through unchanged, so an env that masks actions keeps RLlib's masking
convention ``{"observations": ..., "action_mask": ...}``. The global state for centralised
critics is ``state()`` here too, and with ``with_state=True`` each agent's info also carries it
under ``"state"`` (RLlib connectors read infos). The episode ends for RLlib (``__all__``) when
no agent is left.

Training in Arena uses the faster ``policies.sampling`` path; this adapter serves users of
RLlib's own multi-agent stack and Ray's env registry (``envs.registry.register_with_ray``).
"""

from __future__ import annotations

from typing import Any

import numpy as np
from ray.rllib.env.multi_agent_env import MultiAgentEnv

import envs


class RLlibMultiAgentEnv(MultiAgentEnv):
    """RLlib view of ``envs.make(env_id, **env_config)``.

    Args:
        env_id: a registered Arena id.
        env_config: the env's arguments, plus the optional ``with_state`` flag.
    """

    def __init__(self, env_id: str, env_config: dict[str, Any] | None = None):
        super().__init__()
        cfg = dict(env_config or {})
        self.with_state = bool(cfg.pop("with_state", False))
        self.env = envs.make(env_id, **cfg)
        self.env_id = env_id
        self.possible_agents = list(self.env.possible_agents)
        self.agents = list(self.possible_agents)
        self.observation_spaces = {a: self.env.observation_space(a) for a in self.possible_agents}
        self.action_spaces = {a: self.env.action_space(a) for a in self.possible_agents}
        self.metadata = getattr(self.env, "metadata", {})

    def state(self) -> np.ndarray:
        return np.asarray(self.env.state(), dtype=np.float32)

    def _infos(self, infos: dict) -> dict:
        if not self.with_state:
            return infos
        s = self.state()
        return {a: {**infos.get(a, {}), "state": s} for a in self.agents}

    def reset(self, *, seed: int | None = None, options: dict | None = None):
        obs, infos = self.env.reset(seed=seed, options=options)
        self.agents = list(self.env.agents)
        return obs, self._infos(infos)

    def step(self, action_dict: dict):
        obs, rewards, terms, truncs, infos = self.env.step(action_dict)
        self.agents = list(self.env.agents)
        terms = dict(terms)
        truncs = dict(truncs)
        terms["__all__"] = all(terms.values()) if terms else True
        truncs["__all__"] = not self.agents and not terms["__all__"]
        return obs, rewards, terms, truncs, self._infos(infos)

    def render(self):
        return self.env.render()

    def close(self):
        self.env.close()
