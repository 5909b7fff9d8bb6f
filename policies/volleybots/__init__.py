"""VolleyBots' released 3v3 policies acting in Arena's ``volleyball/3v3-v0``.

VolleyBots (github.com/thu-uav/VolleyBots@680493a, MIT) ships the policies of its 3v3
cross-play study: ``sp`` (one self-play actor shared by the three drones, also the flat
opponent of its hierarchical evaluation, ``scripts/evaluation_shell/volleyball3v3_hier.sh``),
and the populations ``fsp`` (10 members), ``psro_uniform`` (4) and ``psro_nash`` (8, with its
Nash meta-policies), whose members hold one actor per drone (``share_actor`` off).
``convert.py`` turned them into the plain tensors under ``weights/`` (sha256 in
``weights/manifest.json``), read here with ``allow_pickle=False``.

The actor (``volley_bots/learning/common.py`` ``make_encoder``, ``modules/networks.py`` ``MLP``,
``modules/distributions.py`` ``CustomDiagGaussian``): LayerNorm of the 57-number observation,
then three Linear-ELU-LayerNorm layers of 256, 128, 128, a Gaussian with mean
``fc_mean(h)`` and a state-free ``log_std``. Arena's 3v3 observation is VolleyBots'
``_compute_state_and_obs`` element by element (symmetric, own team first; checked in
``tests/policies/test_volleybots.py``), and its action is the same 4 rotor commands in
[-1, 1], so the actors read Arena's observations as they are.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

WEIGHTS = Path(__file__).parent / "weights"
POPULATIONS = ("sp", "fsp", "psro_uniform", "psro_nash")
OBS_DIM, ACT_DIM = 57, 4
_LAYERS = (
    ("encoder.1.layers.0", "encoder.1.layers.2"),
    ("encoder.1.layers.3", "encoder.1.layers.5"),
    ("encoder.1.layers.6", "encoder.1.layers.8"),
)


def manifest() -> dict:
    return json.loads((WEIGHTS / "manifest.json").read_text())


class Actor:
    """One member: ``agents`` actors (1 = shared by the team's three drones, else one per
    drone in team order), parameters ``name -> [agents, ...]`` as VolleyBots names them."""

    def __init__(self, params: dict[str, np.ndarray]):
        self.p = {k: torch.from_numpy(np.ascontiguousarray(v)) for k, v in params.items()}
        self.agents = self.p["act_dist.log_std"].shape[0]

    def _norm(self, x: torch.Tensor, name: str) -> torch.Tensor:
        w, b = self.p[f"{name}.weight"], self.p[f"{name}.bias"]  # [A, n]
        return F.layer_norm(x, x.shape[-1:]) * w + b

    def _linear(self, x: torch.Tensor, name: str) -> torch.Tensor:
        w, b = self.p[f"{name}.weight"], self.p[f"{name}.bias"]  # [A, out, in], [A, out]
        return torch.einsum("...ai,aoi->...ao", x, w) + b

    @torch.no_grad()
    def mean(self, obs: torch.Tensor) -> torch.Tensor:
        """Action means ``[B, 3, 4]`` for observations ``[B, 3, 57]`` (team order)."""
        h = self._norm(obs, "encoder.0")
        for linear, norm in _LAYERS:
            h = self._norm(F.elu(self._linear(h, linear)), norm)
        return self._linear(h, "act_dist.fc_mean")

    @property
    def std(self) -> torch.Tensor:
        return self.p["act_dist.log_std"].exp()


def load_members(name: str) -> list[Actor]:
    """The members of population ``name`` (one of :data:`POPULATIONS`)."""
    if name not in POPULATIONS:
        raise ValueError(f"unknown VolleyBots population {name!r}; known: {', '.join(POPULATIONS)}")
    with np.load(WEIGHTS / f"{name}.npz", allow_pickle=False) as z:
        arrays = {k: z[k] for k in z.files}
    count = manifest()["populations"][name]["members"]
    return [
        Actor({k.split("/", 1)[1]: v for k, v in arrays.items() if k.startswith(f"member{m}/")})
        for m in range(count)
    ]


class VolleyBotsTeam:
    """A VolleyBots population playing one side of Arena's 3v3 match, as in VolleyBots'
    cross-play (``scripts/train_psro_cross_play.py``): each point (each world's episode) draws
    one member from the population's meta-policy (uniform, or ``psro_nash``'s Nash weights for
    the side it plays: VolleyBots' ``meta_policy_0`` for the near team, ``_1`` for the far),
    whose actions are sampled from its Gaussian (``explore``, VolleyBots' evaluation) or its
    mean.

    Has :class:`policies.inference.ModulePolicy`'s ``act_group`` and ``episodes_ended``, so
    ``policies.selfplay.league.play`` and the hierarchy's matches take it as a team."""

    def __init__(self, name: str, side: int = 1, seed: int = 0, member: int | None = None):
        self.name = name
        self.members = load_members(name)
        meta = manifest()["populations"][name]["meta_policy"]
        k = len(self.members)
        weights = np.full(k, 1.0 / k) if meta == "uniform" else np.asarray(meta[str(side)])
        if member is not None:
            if not 0 <= member < k:
                raise ValueError(f"{name} has members 0-{k - 1}, got {member}")
            weights = np.eye(k)[member]
        self.weights = weights / weights.sum()
        self.rng = np.random.default_rng(seed)
        self.choice: np.ndarray | None = None

    def episodes_ended(self, ended: np.ndarray) -> None:
        """Worlds whose point ended draw their next member."""
        if self.choice is not None and ended.any():
            self.choice[ended] = self.rng.choice(
                len(self.members), int(ended.sum()), p=self.weights
            )

    def act_group(self, obs: np.ndarray, mask=None, explore: bool = True, state=None):
        B = obs.shape[0]
        if obs.shape[1:] != (3, OBS_DIM):
            raise ValueError(f"VolleyBots' actors play 3v3: obs [B, 3, 57], got {list(obs.shape)}")
        if self.choice is None or len(self.choice) != B:
            self.choice = self.rng.choice(len(self.members), B, p=self.weights)
        x = torch.from_numpy(np.ascontiguousarray(obs, np.float32))
        actions = np.zeros((B, 3, ACT_DIM), np.float32)
        for m in np.unique(self.choice):
            rows = np.flatnonzero(self.choice == m)
            actor = self.members[m]
            a = actor.mean(x[rows])
            if explore:
                a = a + actor.std * torch.randn(a.shape)
            actions[rows] = a.numpy()
        return actions, None
