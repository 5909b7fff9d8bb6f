"""A trained policy without its Algorithm: the run's RLModules rebuilt from the algorithm's
module specs and loaded with the checkpoint's plain weights, acting on the observations of a
PettingZoo env. ``arena eval`` plays episodes with it; the policy server uses the same pieces.

Nothing here unpickles: RLlib's checkpoint files are cloudpickles that run code when loaded,
so the weights are read from ``weights/<module>.pt`` (a state dict of tensors) with
``torch.load(weights_only=True)``, which only accepts tensors and plain containers.

Each module's ``model_config`` says which agents it acts for and what it reads (its
:class:`policies.batch.BatchSpec`), so nothing here depends on the algorithm.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from ray.rllib.core.rl_module.rl_module import RLModule

from policies.batch import BatchSpec

WEIGHTS_DIR = "weights"


class WeightsError(ValueError):
    """Module weights that are missing, damaged or do not fit the run's modules."""


def weights_file(module_id: str) -> str:
    """The file of a module's weights inside a checkpoint's ``weights/``."""
    if not module_id or "/" in module_id or module_id.startswith("."):
        raise WeightsError(f"module id {module_id!r} cannot name a file")
    return f"{module_id}.pt"


def save_weights(weights: dict[str, dict], weights_dir: str | Path) -> dict[str, dict]:
    """Writes ``module -> state dict`` as ``weights_dir/<module>.pt``; returns each file's
    size and sha256 (what ``arena.json`` records to verify the checkpoint later)."""
    import hashlib

    weights_dir = Path(weights_dir)
    weights_dir.mkdir(parents=True, exist_ok=True)
    files = {}
    for mid, state in weights.items():
        path = weights_dir / weights_file(mid)
        torch.save({k: torch.as_tensor(v).detach().cpu() for k, v in state.items()}, path)
        data = path.read_bytes()
        files[f"{WEIGHTS_DIR}/{path.name}"] = {
            "bytes": len(data),
            "sha256": hashlib.sha256(data).hexdigest(),
        }
    return files


class ModulePolicy:
    """Greedy or sampled actions of one restored module.

    Args:
        module: the restored RLModule (``policies.modules.ActorCritic``).
    """

    def __init__(self, module: RLModule):
        self.module = module.eval() if hasattr(module, "eval") else module
        cfg = module.model_config
        self.spec = BatchSpec.from_dict(cfg["batch_spec"])
        self.agents: list[str] = list(cfg["slot"]["agents"])
        self.action_space = module.action_space
        self.discrete = isinstance(self.action_space, gym.spaces.Discrete)
        self.recurrent = bool(module.get_initial_state())

    def initial_state(self, rows: int) -> dict | None:
        return self.module.initial_state_rows(rows)

    def act_rows(
        self, batch: dict[str, np.ndarray], explore: bool | np.ndarray = False, state=None
    ) -> tuple[np.ndarray, dict | None]:
        """Actions for packed rows: sampled where ``explore`` (a bool, or one bool per row, so
        a batch mixing both modes still takes one forward pass), else greedy; and the next
        hidden state (recurrent modules, which need ``state``)."""
        with torch.no_grad():
            inputs, state = self.module.step(
                {k: torch.from_numpy(v) for k, v in batch.items()}, state
            )
            if self.discrete:
                greedy = lambda: inputs.argmax(dim=-1)  # noqa: E731
                sample = lambda: torch.distributions.Categorical(logits=inputs).sample()  # noqa: E731
            else:
                dist = self.module.get_inference_action_dist_cls().from_logits(inputs)
                greedy, sample = dist.to_deterministic().sample, dist.sample
            if not isinstance(explore, np.ndarray):
                return (sample() if explore else greedy()).numpy(), state
            pick = torch.from_numpy(np.asarray(explore, bool))
            if not self.discrete:
                pick = pick[:, None]
            return torch.where(pick, sample(), greedy()).numpy(), state


def module_from_weights(spec, path: Path):
    """The module of ``spec`` with the plain weights file ``path`` (nothing is unpickled); a
    damaged or foreign file is a :class:`WeightsError` naming it."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
        module = spec.build()
        module.load_state_dict(state)
    except Exception as e:  # name the file, never a traceback
        raise WeightsError(
            f"{path}: cannot load module weights ({type(e).__name__}: {str(e)[:200]})"
        ) from None
    return module


class Policy:
    """The run's modules acting together for any subset of an env's agents.

    Args:
        modules: module id -> :class:`ModulePolicy`.
    """

    def __init__(self, modules: dict[str, ModulePolicy]):
        self.modules = modules
        self.module_of = {a: mid for mid, m in modules.items() for a in m.agents}
        self.place = {a: m.agents.index(a) for m in modules.values() for a in m.agents}
        self.recurrent = any(m.recurrent for m in modules.values())
        self._hidden: dict[str, dict] = {}

    @classmethod
    def from_weights(cls, specs, weights_dir: str | Path) -> Policy:
        """The modules of ``specs`` (a ``MultiRLModuleSpec``) with the weights in
        ``weights_dir`` (``<module>.pt`` each); a missing or damaged file is a
        :class:`WeightsError` naming it."""
        weights_dir = Path(weights_dir)
        modules = {}
        for mid, spec in specs.rl_module_specs.items():
            path = weights_dir / weights_file(mid)
            if not path.is_file():
                raise WeightsError(
                    f"{weights_dir.parent}: no weights for module {mid!r} ({path} is missing; "
                    "checkpoints from before Arena's training core v2 hold only RLlib's pickles, "
                    "which eval and serve do not load)"
                )
            modules[mid] = ModulePolicy(module_from_weights(spec, path))
        return cls(modules)

    @property
    def agents(self) -> list[str]:
        return list(self.module_of)

    def reset(self) -> None:
        """Forgets recurrent hidden states (call at the start of each episode)."""
        self._hidden = {}

    def pack(self, mid: str, obs: dict[str, Any], state: np.ndarray | None) -> dict:
        """Module ``mid``'s input rows for the agents of ``obs`` (agent -> observation, or
        ``{"observations", "action_mask"}`` where the env masks actions)."""
        spec = self.modules[mid].spec
        agents = list(obs)
        masked = isinstance(obs[agents[0]], dict)
        x = np.stack([obs[a]["observations"] if masked else obs[a] for a in agents])
        mask = np.stack([obs[a]["action_mask"] for a in agents]) if masked else None
        return spec.pack(x, mask, state, [self.place[a] for a in agents])

    def act(self, obs: dict[str, Any], state=None, explore: bool = False) -> dict[str, Any]:
        """Actions for the agents in ``obs`` (each by its own module)."""
        by_module: dict[str, dict[str, Any]] = {}
        for agent, o in obs.items():
            if agent not in self.module_of:
                raise ValueError(f"no module acts for agent {agent!r}; agents: {self.agents}")
            by_module.setdefault(self.module_of[agent], {})[agent] = o
        out = {}
        for mid, part in by_module.items():
            m = self.modules[mid]
            h = None
            if m.recurrent:
                init = m.initial_state(1)
                rows = [self._hidden.get(a, init) for a in part]
                h = {k: torch.cat([r[k] for r in rows]) for k in init}
            actions, h = m.act_rows(self.pack(mid, part, state), explore, h)
            for i, agent in enumerate(part):
                out[agent] = int(actions[i]) if m.discrete else actions[i]
                if h is not None:
                    self._hidden[agent] = {k: v[i : i + 1] for k, v in h.items()}
        return out


__all__ = ["ModulePolicy", "Policy"]
