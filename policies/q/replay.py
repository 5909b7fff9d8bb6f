"""A replay of whole episodes for recurrent agents, in arrays (PyMARL's ``ReplayBuffer`` of
``EpisodeBatch``, oxwhirl/pymarl ``src/components/episode_buffer.py``).

Episodes are stored padded to the longest one seen so far, in a ring of ``capacity`` slots:
per agent module its inputs ``[C, T + 1, K, ...]`` (observation and action mask; the one-hot
agent id is the same in every row, so it is rebuilt when sampling) and actions ``[C, T, K]``;
the team reward ``[C, T]``, the global state ``[C, T + 1, S]``, each episode's length and
whether it ended by termination. A batch is ``n`` episodes drawn uniformly without
replacement, cut to the longest of them. The arrays are made with ``np.zeros``, which the
kernel backs with pages only once they are written, so the padding of short episodes costs
little memory.

RLlib's ``MultiAgentEpisodeReplayBuffer`` samples single timesteps (n-step transitions) out of
episode objects, not whole episodes for a recurrent learner, and costs Python work per
stored step; docs/performance.md has the measurement (bench/replay_throughput.py).
"""

from __future__ import annotations

import os

import numpy as np

from policies.batch import AGENT_ID, STATE, BatchSpec
from policies.sampling import Episode


class ReplayError(ValueError):
    """A replay that cannot be held (too big for this machine's memory)."""


class EpisodeReplay:
    """See the module docstring.

    Args:
        capacity: episodes kept (the oldest are overwritten).
        specs: module id -> the input spec of each agent module.
        agents: module id -> its number of agents in an env.
        state_dim: length of the env's global state (0: none stored).
        team_reward: ``mean`` or ``sum`` of the agents' rewards per step (SMAC gives every
            agent the team reward: ``mean`` is that reward).
    """

    def __init__(
        self,
        capacity: int,
        specs: dict[str, BatchSpec],
        agents: dict[str, int],
        state_dim: int,
        team_reward: str = "mean",
    ):
        self.capacity, self.specs, self.agents = capacity, specs, agents
        self.state_dim = state_dim
        self.team_reward = team_reward
        self.size = self.next = 0
        self.T = 0  # steps each slot holds (the longest episode stored)
        self.arrays: dict[str, np.ndarray] = {}

    # -- layout -------------------------------------------------------------------------------

    def _fields(self, T: int) -> dict[str, tuple[tuple[int, ...], np.dtype]]:
        """name -> (shape of one slot with T steps, dtype)."""
        out = {}
        for mid, spec in self.specs.items():
            K = self.agents[mid]
            for key, (shape, dtype) in spec.fields().items():
                if key not in (AGENT_ID, STATE):
                    out[f"{mid}/{key}"] = ((T + 1, K, *shape), dtype)
            out[f"{mid}/actions"] = ((T, K), np.dtype(np.int64))
        out["reward"] = ((T,), np.dtype(np.float32))
        out["state"] = ((T + 1, self.state_dim), np.dtype(np.float32))
        out["length"] = ((), np.dtype(np.int64))
        out["terminated"] = ((), np.dtype(bool))
        return out

    def bytes_for(self, T: int) -> int:
        """Bytes the full ring takes with slots of T steps."""
        return self.capacity * sum(
            int(np.prod(shape)) * dtype.itemsize for shape, dtype in self._fields(T).values()
        )

    def _grow(self, T: int) -> None:
        need = self.bytes_for(T)
        have = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
        if need > have // 2:
            raise ReplayError(
                f"a replay of buffer_size={self.capacity} episodes of up to {T} steps needs "
                f"{need / 2**30:.1f} GiB; this machine has {have / 2**30:.1f} GiB: use a smaller "
                "buffer_size"
            )
        old, self.T = self.arrays, T
        self.arrays = {
            name: np.zeros((self.capacity, *shape), dtype)
            for name, (shape, dtype) in self._fields(T).items()
        }
        for name, arr in old.items():  # copy what is stored into the longer slots
            new = self.arrays[name]
            new[(slice(None), *(slice(0, n) for n in arr.shape[1:]))] = arr

    # -- filling and sampling -----------------------------------------------------------------

    def add(self, episodes: list[Episode]) -> None:
        """Stores whole episodes (overwriting the oldest when full)."""
        if not episodes:
            return
        longest = max(e.length for e in episodes)
        if longest > self.T:
            self._grow(max(longest, self.T))
        a = self.arrays
        for e in episodes:
            i, L = self.next, e.length
            for mid in self.specs:  # the trained modules (a frozen one learns nothing)
                for key, value in e.inputs[mid].items():
                    if key not in (AGENT_ID, STATE):
                        a[f"{mid}/{key}"][i, : L + 1] = value
                        a[f"{mid}/{key}"][i, L + 1 :] = 0
                a[f"{mid}/actions"][i, :L] = e.actions[mid]
                a[f"{mid}/actions"][i, L:] = 0
            rewards = e.rewards.mean(axis=1) if self.team_reward == "mean" else e.rewards.sum(1)
            a["reward"][i, :L], a["reward"][i, L:] = rewards, 0
            if self.state_dim:
                a["state"][i, : L + 1], a["state"][i, L + 1 :] = e.state, 0
            a["length"][i], a["terminated"][i] = L, e.terminated
            self.next = (i + 1) % self.capacity
            self.size = min(self.size + 1, self.capacity)

    def can_sample(self, n: int) -> bool:
        return self.size >= n

    def sample(self, n: int, rng: np.random.Generator) -> dict[str, dict]:
        """``n`` whole episodes, padded to the longest of them (T steps):

        * per agent module: ``obs`` (its input fields ``[n, T + 1, K, ...]``) and ``actions``
          ``[n, T, K]``, with the team's ``reward``, ``terminated`` and ``filled`` ``[n, T]``;
        * ``state`` ``[n, T + 1, S]``.
        """
        idx = rng.choice(self.size, n, replace=False)
        lengths = self.arrays["length"][idx]
        T = int(lengths.max())
        steps = np.arange(T)
        a = self.arrays
        team = {
            "reward": a["reward"][idx, :T],
            "terminated": (steps[None] == lengths[:, None] - 1) & a["terminated"][idx, None],
            "filled": steps[None] < lengths[:, None],
        }
        out = {}
        for mid, spec in self.specs.items():
            obs = {
                key: a[f"{mid}/{key}"][idx, : T + 1]
                for key in spec.fields()
                if key not in (AGENT_ID, STATE)
            }
            K = self.agents[mid]
            if spec.num_ids:
                eye = np.eye(spec.num_ids, dtype=np.float32)
                obs[AGENT_ID] = np.broadcast_to(eye, (n, T + 1, K, K)).copy()
            out[mid] = {"obs": obs, "actions": a[f"{mid}/actions"][idx, :T], **team}
        out["state"] = a["state"][idx, : T + 1]
        return out

    # -- checkpoints ----------------------------------------------------------------------------

    def get_state(self) -> dict:
        """What is stored (the filled slots, cut to the longest episode), for a checkpoint."""
        T = int(self.arrays["length"][: self.size].max()) if self.size else 0
        arrays = {
            name: arr[: self.size, : T + 1] if arr.ndim > 1 else arr[: self.size]
            for name, arr in self.arrays.items()
        }
        if arrays:  # actions and reward have T steps, the rest T + 1
            for name in arrays:
                if name.endswith("/actions") or name == "reward":
                    arrays[name] = self.arrays[name][: self.size, :T]
        return {"size": self.size, "next": self.next, "arrays": arrays, "T": T}

    def set_state(self, state: dict) -> None:
        if not state["size"]:
            return
        self.arrays, self.T = {}, 0
        self._grow(int(state["T"]))
        for name, arr in state["arrays"].items():
            self.arrays[name][(slice(0, len(arr)), *(slice(0, n) for n in arr.shape[1:]))] = arr
        self.size, self.next = int(state["size"]), int(state["next"])
