"""A trained policy without its Algorithm: the RLModule restored from a checkpoint, acting on
the observations of a PettingZoo env. ``arena eval`` plays episodes with it; the policy
server uses the same interface."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from ray.rllib.core.rl_module.rl_module import RLModule

from policies.modules import ObsLayout

MODULE_PATH = Path("learner_group", "learner", "rl_module", "default_policy")


class Policy:
    """Greedy or sampled actions of a shared-policy RLModule for any subset of agents.

    Args:
        module: the restored RLModule (``SharedActorCritic``).
        agents: the env's agents in order (their index is the one-hot id of MAPPO's critic).
    """

    def __init__(self, module: RLModule, agents: list[str]):
        self.module = module.eval() if hasattr(module, "eval") else module
        cfg = module.model_config
        self.layout = ObsLayout(**{k: cfg[k] for k in ObsLayout.__dataclass_fields__})
        self.agents = list(agents)
        self.action_space = module.action_space
        self.discrete = isinstance(self.action_space, gym.spaces.Discrete)

    @classmethod
    def from_checkpoint(cls, checkpoint: str | Path, agents: list[str]) -> Policy:
        path = (Path(checkpoint) / MODULE_PATH).resolve()  # RLlib reads URIs: absolute
        if not path.exists():
            raise FileNotFoundError(f"{checkpoint} holds no RLModule (looked for {path})")
        return cls(RLModule.from_checkpoint(path), agents)

    def inputs(self, obs: dict[str, Any], state: np.ndarray | None = None) -> np.ndarray:
        """Module input rows for ``obs`` (agent -> observation, or ``{"observations",
        "action_mask"}`` where the env masks actions)."""
        lay = self.layout
        rows = np.zeros((len(obs), lay.size), np.float32)
        for i, (agent, o) in enumerate(obs.items()):
            if isinstance(o, dict):
                rows[i, : lay.obs_dim] = o["observations"]
                if lay.mask_dim:
                    rows[i, lay.obs_dim : lay.obs_dim + lay.mask_dim] = o["action_mask"]
            else:
                rows[i, : lay.obs_dim] = o
            if lay.critic_dim and state is not None:
                rows[i, lay.obs_dim + lay.mask_dim : lay.size - lay.num_agents] = state
                rows[i, lay.size - lay.num_agents + self.agents.index(agent)] = 1.0
        return rows

    def act_rows(self, rows: np.ndarray, explore: bool | np.ndarray = False) -> np.ndarray:
        """Actions for module input rows ``[n, size]``: sampled where ``explore`` (a bool, or one
        bool per row, so a batch mixing both modes still takes one forward pass), else greedy."""
        with torch.no_grad():
            inputs = self.module.action_dist_inputs(torch.from_numpy(rows))
            if self.discrete:
                greedy = lambda: inputs.argmax(dim=-1)  # noqa: E731
                sample = lambda: torch.distributions.Categorical(logits=inputs).sample()  # noqa: E731
            else:
                dist = self.module.get_inference_action_dist_cls().from_logits(inputs)
                greedy, sample = dist.to_deterministic().sample, dist.sample
            if not isinstance(explore, np.ndarray):
                return (sample() if explore else greedy()).numpy()
            pick = torch.from_numpy(np.asarray(explore, bool))
            if not self.discrete:
                pick = pick[:, None]
            return torch.where(pick, sample(), greedy()).numpy()

    def act(self, obs: dict[str, Any], state=None, explore: bool = False) -> dict[str, Any]:
        """Actions for the agents in ``obs``."""
        if not obs:
            return {}
        actions = self.act_rows(self.inputs(obs, state), explore)
        return {
            agent: (int(a) if self.discrete else a) for agent, a in zip(obs, actions, strict=True)
        }
