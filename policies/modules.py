"""The actor-critic RLModule of Arena's PPO algorithms (ippo, mappo, and what builds on them).

One module serves the agents mapped to it (all agents, a group, or one agent). Its input is
the dict :class:`policies.batch.BatchSpec` describes. The observation goes through an encoder
chosen by its kind (vector: as is; image: a small CNN on uint8 frames scaled in the module;
tokens: an embedding averaged over the sequence), then an MLP, an optional GRU, and the
policy head. The critic reads the global state and agent id where the spec has them (MAPPO),
else the encoded observation (IPPO), through its own MLP and optional GRU.

Recurrent modules follow RLlib's stateful-module conventions: ``get_initial_state()`` gives
``{"actor": h, "critic": h}``, RLlib's sequence batches come as ``[B, T=max_seq_len, ...]``
with ``STATE_IN`` at each sequence start, and ``STATE_OUT`` is the state after the last step.
The array path's learner (``policies.ppo.array_path``) hands chunks instead: flat rows
``[C * L, ...]``, C chunks of L steps one after the other, ``STATE_IN`` ``[C, h]`` at each
chunk's start and :data:`SEQ_RESETS` ``[C * L]`` (1 where an episode starts inside a chunk:
the state is reset there, as MAPPO's ``onpolicy`` multiplies it by its masks).
Illegal actions get the smallest float as logit, so they are never sampled and carry no
probability in the loss.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import gymnasium as gym
import numpy as np
import torch
from ray.rllib.core.columns import Columns
from ray.rllib.core.rl_module.apis.value_function_api import ValueFunctionAPI
from ray.rllib.core.rl_module.rl_module import RLModule
from ray.rllib.core.rl_module.torch import TorchRLModule
from ray.rllib.utils.annotations import override
from torch import nn

from policies.batch import AGENT_ID, MASK, OBS, STATE, BatchSpec
from policies.value_norm import ValueNorm

FLOAT_MIN = torch.finfo(torch.float32).min
SEQ_RESETS = "seq_resets"
"""A chunked training batch's column ``[C * L]``: 1.0 where the recurrent state restarts from
the initial state before that step (an episode's first step), else 0.0."""


@dataclass
class ModelSettings:
    """The network of each module (``--set model.KEY=VALUE``)."""

    hidden: list[int] | None = None
    """Hidden layer sizes of actor and critic (default [64, 64])."""
    activation: str = "tanh"
    """Hidden activation: tanh or relu."""
    recurrent: bool = False
    """A GRU after the hidden layers of actor and critic (hidden state carried across steps)."""
    max_seq_len: int = 16
    """Training sequence length of a recurrent module (BPTT window): PPO learns on chunks of
    this many steps, its rollout rounded up to a multiple of it."""
    conv_channels: list[int] | None = None
    """Channels of the CNN encoding image observations (default [16, 32])."""
    token_embedding: int = 32
    """Embedding size of token observations."""
    agent_id: bool = False
    """The actor (and an IPPO critic) also read the one-hot id of the agent among the module's
    agents: parameter sharing with agent ids (FuPS+ID)."""
    seeds: int = 1
    """Independent copies of every network, one per seed, trained side by side in one process
    (``arena train --seeds N``): layers are :class:`GroupedLinear` and a batch's rows are
    ``seeds`` contiguous blocks, one per seed. Feed-forward vector-observation modules only."""
    input_norm: bool = False
    """A LayerNorm of the MLP's input in actor and critic (MAPPO's
    ``use_feature_normalization``: marlbenchmark/on-policy@de66d7a:
    onpolicy/algorithms/utils/mlp.py:46-47,52-53)."""
    init: str = "arena"
    """How hidden layers are built: ``arena`` (orthogonal, gain sqrt 2) or ``onpolicy``
    (on-policy's ``MLPLayer``: orthogonal with ``calculate_gain(activation)``, a LayerNorm
    after each hidden layer's activation, mlp.py:7-24; GRU weights orthogonal with gain 1 and
    zero biases, a LayerNorm after the GRU, rnn.py:13-22,79). Heads are the same in both:
    orthogonal, gain 0.01 for the policy (r_actor_critic.py:39 with config.py:211 ``--gain``),
    1 for the value (r_actor_critic.py:146-152, onpolicy/algorithms/utils/util.py:7)."""
    value_norm: bool = False
    """The critic predicts values normalised by running statistics of the value targets
    (MAPPO's ``use_valuenorm``, ``policies.value_norm``)."""

    INITS = ("arena", "onpolicy")

    def __post_init__(self):
        self.hidden = [64, 64] if self.hidden is None else self.hidden
        self.conv_channels = [16, 32] if self.conv_channels is None else self.conv_channels

    MAX_LAYER = 16384
    MAX_LAYERS = 64
    MAX_HIDDEN_WEIGHTS = 50_000_000
    MAX_SEQ_LEN = 1024
    MAX_CONV_LAYERS = 8
    MAX_SEEDS = 64

    def problems(self) -> list[str]:
        bad = []
        hidden = f"model.hidden={shown(self.hidden)}"
        if not self.hidden or len(self.hidden) > self.MAX_LAYERS:
            bad.append(f"{hidden} (1..{self.MAX_LAYERS} layers)")
        elif any(h <= 0 or h > self.MAX_LAYER for h in self.hidden):
            bad.append(f"{hidden} (layer sizes in 1..{self.MAX_LAYER})")
        elif sum(a * b for a, b in zip(self.hidden[:-1], self.hidden[1:], strict=True)) > (
            self.MAX_HIDDEN_WEIGHTS
        ):  # actor and critic each: refuse what would take gigabytes before allocating it
            bad.append(f"{hidden} (over {self.MAX_HIDDEN_WEIGHTS:,} weights)")
        if self.activation not in ("tanh", "relu"):
            bad.append(f"model.activation={shown(self.activation)} (tanh or relu)")
        if not 0 < self.max_seq_len <= self.MAX_SEQ_LEN:  # rollouts are rounded up to it
            bad.append(f"model.max_seq_len={self.max_seq_len} (in 1..{self.MAX_SEQ_LEN})")
        channels = f"model.conv_channels={shown(self.conv_channels)}"
        if not self.conv_channels or len(self.conv_channels) > self.MAX_CONV_LAYERS:
            bad.append(f"{channels} (1..{self.MAX_CONV_LAYERS} layers)")
        elif any(c <= 0 or c > self.MAX_LAYER for c in self.conv_channels):
            bad.append(f"{channels} (channels in 1..{self.MAX_LAYER})")
        if not 0 < self.token_embedding <= self.MAX_LAYER:
            bad.append(f"model.token_embedding={self.token_embedding} (in 1..{self.MAX_LAYER})")
        if not 0 < self.seeds <= self.MAX_SEEDS:
            bad.append(f"model.seeds={self.seeds} (in 1..{self.MAX_SEEDS})")
        elif self.seeds > 1 and self.recurrent:
            bad.append(f"model.seeds={self.seeds} with model.recurrent (stacked seeds are "
                       "feed-forward only)")  # fmt: skip
        if self.init not in self.INITS:
            bad.append(f"model.init={shown(self.init)} ({' or '.join(self.INITS)})")
        layer_norms = self.input_norm or self.init == "onpolicy" or self.value_norm
        if self.seeds > 1 and layer_norms:
            # LayerNorm and the value normaliser are not stacked per seed
            bad.append(f"model.seeds={self.seeds} with model.input_norm, model.init=onpolicy "
                       "or model.value_norm (one seed only)")  # fmt: skip
        return bad


def shown(value: Any, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters: an error line quotes what was given, not
    all 300,000 entries of it."""
    text = repr(value)
    return text if len(text) <= limit else f"{text[: limit - 3]}..."


def _linear(n_in: int, n_out: int, gain: float, groups: int = 1) -> nn.Module:
    """A linear layer with orthogonal init and zero bias; ``groups > 1``: a
    :class:`GroupedLinear` of that many independent ones."""
    if groups > 1:
        return GroupedLinear(n_in, n_out, groups, gain)
    layer = nn.Linear(n_in, n_out)
    nn.init.orthogonal_(layer.weight, gain)
    nn.init.zeros_(layer.bias)
    return layer


class GroupedLinear(nn.Module):
    """``groups`` independent linear layers (one per seed) applied in one batched matmul.

    The input rows ``[G * R, n_in]`` are G contiguous blocks of R rows, block g for layer g.
    ``weight[g]`` is ``nn.Linear.weight.T`` of layer g, so slicing it gives a plain layer
    (:func:`seed_state_dict`).
    """

    def __init__(self, n_in: int, n_out: int, groups: int, gain: float):
        super().__init__()
        self.groups = groups
        # each slice drawn as _linear draws a plain layer's weights
        w = [_linear(n_in, n_out, gain).weight.detach().T for _ in range(groups)]
        self.weight = nn.Parameter(torch.stack(w).contiguous())
        self.bias = nn.Parameter(torch.zeros(groups, 1, n_out))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.baddbmm(self.bias, blocks(x, self.groups), self.weight).reshape(x.shape[0], -1)


def blocks(x: torch.Tensor, groups: int) -> torch.Tensor:
    """Rows ``[G * R, ...]`` as ``[G, R, ...]``, one block per seed."""
    if x.shape[0] % groups:
        raise ValueError(
            f"{x.shape[0]} rows for {groups} seeds: a stacked module's rows must be "
            f"{groups} equal blocks, one per seed"
        )
    return x.reshape(groups, x.shape[0] // groups, *x.shape[1:])


def mlp_body(
    sizes: list[int],
    activation: str,
    groups: int = 1,
    *,
    input_norm: bool = False,
    init: str = "arena",
) -> nn.Sequential:
    """Hidden layers with orthogonal init, each followed by the activation (``groups > 1``:
    :class:`GroupedLinear` layers, one network per seed).

    ``init="arena"``: gain sqrt 2. ``init="onpolicy"``: on-policy's ``MLPLayer``, gain
    ``calculate_gain(activation)`` and a LayerNorm after each activation
    (marlbenchmark/on-policy@de66d7a: onpolicy/algorithms/utils/mlp.py:11-24).
    ``input_norm``: a LayerNorm of the input first (``use_feature_normalization``, mlp.py:52-53).
    """
    act = {"tanh": nn.Tanh, "relu": nn.ReLU}[activation]
    onpolicy = init == "onpolicy"
    gain = nn.init.calculate_gain(activation) if onpolicy else np.sqrt(2)
    layers: list[nn.Module] = [nn.LayerNorm(sizes[0])] if input_norm else []
    for n_in, n_out in zip(sizes[:-1], sizes[1:], strict=True):
        layers += [_linear(n_in, n_out, gain, groups), act()]
        if onpolicy:
            layers.append(nn.LayerNorm(n_out))
    return nn.Sequential(*layers)


def onpolicy_gru(size: int) -> nn.GRU:
    """A GRU initialised as on-policy's ``RNNLayer``: every weight matrix orthogonal (gain 1),
    biases zero (onpolicy/algorithms/utils/rnn.py:13-20)."""
    gru = nn.GRU(size, size, batch_first=True)
    for name, param in gru.named_parameters():
        if "bias" in name:
            nn.init.zeros_(param)
        else:
            nn.init.orthogonal_(param)
    return gru


def seed_state_dict(state: dict[str, Any], seed: int, seeds: int) -> dict[str, Any]:
    """One seed's weights of a stacked module (``model.seeds = seeds``) as the state dict of
    the same module with ``seeds = 1``: GroupedLinear weights ``[G, in, out]`` sliced and
    transposed to ``nn.Linear``'s ``[out, in]``, biases ``[G, 1, out]`` to ``[out]``, the
    Gaussian's ``log_std [G, A]`` to ``[A]``."""
    if not 0 <= seed < seeds:
        raise ValueError(f"seed index {seed} of a run with {seeds} seeds (0..{seeds - 1})")
    out = {}
    for key, value in state.items():
        if getattr(value, "ndim", 0) == 3 and value.shape[0] == seeds:
            value = value[seed].T if key.endswith("weight") else value[seed, 0]
        elif key == "log_std":
            value = value[seed]
        out[key] = value.copy() if isinstance(value, np.ndarray) else value.clone()
    return out


def stacked_seeds(multi_spec) -> int:
    """``model.seeds`` of a run's modules (a ``MultiRLModuleSpec``): they all share it."""
    seeds = {
        spec.model_config.get("model", {}).get("seeds", 1)
        for spec in multi_spec.rl_module_specs.values()
        if isinstance(spec.model_config, dict)
    }
    return max(seeds, default=1)


def stacking_problem(module_class: type, spec: BatchSpec) -> str | None:
    """Why modules of ``module_class`` on ``spec``'s observations cannot stack seeds, if so."""
    if not getattr(module_class, "STACKS_SEEDS", False):
        return f"{module_class.__name__} modules"
    if spec.kind != "vector":
        return f"{spec.kind} observations (vector observations only)"
    return None


class ImageEncoder(nn.Module):
    """uint8 frames ``[N, H, W, C]`` -> features; scaled to [0, 1] here, not in the buffers."""

    def __init__(self, shape: tuple[int, ...], channels: list[int]):
        super().__init__()
        h, w, c = shape
        layers: list[nn.Module] = []
        size = min(h, w)
        for i, out in enumerate(channels):
            # the first layer halves the frame; later ones halve it while it is 16 or more
            # pixels across (84 x 84 -> 41 -> 20 -> 9), so the flat features stay small
            kernel, stride = (4, 2) if i == 0 else (3, 2 if size >= 16 else 1)
            layers += [nn.Conv2d(c, out, kernel, stride=stride), nn.ReLU()]
            size = (size - kernel) // stride + 1
            c = out
        self.conv = nn.Sequential(*layers, nn.Flatten())
        with torch.no_grad():
            self.size = int(self.conv(torch.zeros(1, shape[2], h, w)).shape[1])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x.permute(0, 3, 1, 2).float() / 255.0)


class TokenEncoder(nn.Module):
    """Token ids ``[N, L]`` (0 = padding) -> the mean of their embeddings."""

    def __init__(self, vocab: int, dim: int):
        super().__init__()
        self.embed = nn.Embedding(vocab, dim, padding_idx=0)
        self.size = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x.long()
        emb = self.embed(x)
        n = (x > 0).sum(-1, keepdim=True).clamp(min=1)
        return emb.sum(-2) / n


def encoder_for(spec: BatchSpec, model: ModelSettings) -> tuple[nn.Module, int]:
    kind = spec.kind
    if kind == "image":
        enc = ImageEncoder(spec.obs_shape, model.conv_channels)
        return enc, enc.size
    if kind == "tokens":
        if spec.obs_high is None:
            raise ValueError("token observations need a bounded space (high = vocabulary - 1)")
        enc = TokenEncoder(int(spec.obs_high) + 1, model.token_embedding)
        return enc, enc.size
    return nn.Identity(), int(spec.obs_shape[0])


class ActorCritic(TorchRLModule, ValueFunctionAPI):
    """Actor and critic of one module; IPPO or MAPPO by the spec's ``state_dim``.

    ``model_config`` keys: ``batch_spec`` (a :class:`BatchSpec` as dict), ``model`` (the
    :class:`ModelSettings` fields) and, when recurrent, ``max_seq_len``.
    """

    SERVED_BY = "serve.policy:ModulesPolicy"
    """The policy server's class for runs of this module (``serve.policy.served_class``)."""

    READS_AGENT_ID = False
    """Whether the module needs the agent id even without ``model.agent_id`` or a critic on
    the global state (see ``policies.ppo.module_specs``)."""

    STACKS_SEEDS = True
    """Whether ``model.seeds > 1`` stacks this class's networks (:class:`GroupedLinear`)."""

    @override(TorchRLModule)
    def setup(self):
        cfg: dict[str, Any] = self.model_config
        self.spec = BatchSpec.from_dict(cfg["batch_spec"])
        self.settings = ModelSettings(**cfg.get("model", {}))
        hidden, activation = list(self.settings.hidden), self.settings.activation
        self.recurrent = self.settings.recurrent
        if isinstance(self.action_space, gym.spaces.Discrete):
            n_out = int(self.action_space.n)
            self.log_std = None
        else:
            n_out = int(np.prod(self.action_space.shape))
            seeds = self.settings.seeds
            self.log_std = nn.Parameter(torch.zeros(*([seeds] if seeds > 1 else []), n_out))
        self.n_out = n_out
        self.encoder, feat = encoder_for(self.spec, self.settings)
        if self.settings.agent_id:
            feat += self.spec.num_ids
        self.build_networks(feat, self.critic_width(feat), hidden, activation)

    def critic_width(self, feat: int) -> int:
        """Width of the critic's input: global state and agent id (MAPPO) or the actor's."""
        return self.spec.state_dim + self.spec.num_ids if self.spec.state_dim else feat

    def build_networks(self, actor_in: int, critic_in: int, hidden: list[int], activation: str):
        """The layers of actor and critic after the encoder: body, GRU, head."""
        G, s = self.settings.seeds, self.settings
        body = {"input_norm": s.input_norm, "init": s.init}
        self.pi_body = mlp_body([actor_in, *hidden], activation, G, **body)
        self.vf_body = mlp_body([critic_in, *hidden], activation, G, **body)
        h = self.gru_size = hidden[-1]
        onpolicy = s.init == "onpolicy"
        gru = onpolicy_gru if onpolicy else (lambda n: nn.GRU(n, n, batch_first=True))
        self.pi_gru = gru(h) if self.recurrent else None
        self.vf_gru = gru(h) if self.recurrent else None
        # on-policy's RNNLayer normalises the GRU's output (rnn.py:22,79)
        norm = onpolicy and self.recurrent
        self.pi_gru_norm = nn.LayerNorm(h) if norm else nn.Identity()
        self.vf_gru_norm = nn.LayerNorm(h) if norm else nn.Identity()
        self.pi_head = _linear(h, self.n_out, 0.01, G)
        self.vf_head = _linear(h, 1, 1.0, G)
        # the critic's outputs are normalised values (policies.value_norm)
        self.value_norm = ValueNorm() if s.value_norm else None

    # -- state --------------------------------------------------------------------------------

    @override(RLModule)
    def get_initial_state(self) -> dict:
        if not self.recurrent:
            return {}
        h = self.gru_size
        return {"actor": torch.zeros(h), "critic": torch.zeros(h)}

    def initial_state_rows(self, rows: int) -> dict | None:
        """The initial state of ``rows`` agents (None for a feed-forward module)."""
        init = self.get_initial_state()
        return {k: v[None].repeat(rows, 1) for k, v in init.items()} if init else None

    # -- pieces -------------------------------------------------------------------------------

    def _recur(
        self, gru, x: torch.Tensor, h0: torch.Tensor, lead: tuple[int, ...], resets=None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Features ``[N, F]`` through ``gru`` from state ``h0``; returns features ``[N, H]``
        and the last hidden state. ``lead`` ``(B, T)``: RLlib's sequences; ``(N,)``: one step
        of N rows, or (``h0`` of C < N rows) C chunks of N / C steps with the state reset
        where ``resets`` ``[N]`` is 1."""
        if len(lead) == 2:
            seq = x.reshape(*lead, -1)
        elif len(h0) == len(x):  # the sampler's step: one op, not the sequence machinery
            h = torch.gru_cell(x, h0, gru.weight_ih_l0, gru.weight_hh_l0, gru.bias_ih_l0,
                               gru.bias_hh_l0)  # fmt: skip
            return h, h
        else:
            seq = x.reshape(len(h0), len(x) // len(h0), -1)
            if resets is not None:
                out, h = gru_unroll(gru, seq, h0, resets.reshape(seq.shape[:2]))
                return out.reshape(-1, out.shape[-1]), h
        out, h = gru(seq, h0[None].contiguous())
        return out.reshape(-1, out.shape[-1]), h[0]

    def _lead(self, batch: dict) -> tuple[int, ...]:
        """The leading axes of ``batch``'s observations: ``(B, T)`` or ``(N,)``."""
        obs = batch[Columns.OBS][OBS]
        return tuple(obs.shape[: obs.dim() - len(self.spec.obs_shape)])

    def _rows(self, batch: dict, key: str) -> torch.Tensor:
        x = batch[Columns.OBS][key]
        width = len(self.spec.obs_shape) if key == OBS else 1
        return x.reshape(-1, *x.shape[x.dim() - width :])

    def actor_input(self, batch: dict) -> torch.Tensor:
        """The encoded observation rows (with the agent id under ``model.agent_id``)."""
        x = self.encoder(self._rows(batch, OBS))
        if self.settings.agent_id:
            x = torch.cat([x, self._rows(batch, AGENT_ID)], dim=-1)
        return x

    def critic_input(self, batch: dict) -> torch.Tensor:
        """Global state and agent id rows (MAPPO), else the actor's input."""
        if not self.spec.state_dim:
            return self.actor_input(batch)
        parts = [self._rows(batch, STATE)]
        if self.spec.num_ids:
            parts.append(self._rows(batch, AGENT_ID))
        return torch.cat(parts, dim=-1)

    def pi_out(self, z: torch.Tensor, batch: dict) -> torch.Tensor:
        """The policy head on the actor's features ``z`` (rows of ``batch``)."""
        return self.pi_head(z)

    def vf_out(self, z: torch.Tensor, batch: dict) -> torch.Tensor:
        """The value head on the critic's features ``z`` (rows of ``batch``)."""
        return self.vf_head(z)

    def actor(self, batch: dict) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Distribution inputs ``[*lead, A]`` and the actor's next hidden state."""
        lead = self._lead(batch)
        z = self.pi_body(self.actor_input(batch))
        h = None
        if self.recurrent:
            h0 = batch[Columns.STATE_IN]["actor"]
            z, h = self._recur(self.pi_gru, z, h0, lead, batch.get(SEQ_RESETS))
            z = self.pi_gru_norm(z)
        return self.policy_head(z, batch, lead), h

    def policy_head(self, z: torch.Tensor, batch: dict, lead: tuple[int, ...]) -> torch.Tensor:
        """Distribution inputs ``[*lead, A]`` from the actor's features ``z``."""
        out = self.pi_out(z, batch)
        if self.log_std is not None:
            log_std = self.log_std
            if log_std.dim() == 2:  # one per seed: each block of rows gets its seed's
                log_std = log_std.repeat_interleave(len(out) // len(log_std), dim=0)
            out = torch.cat([out, log_std.expand_as(out)], dim=-1)
        elif self.spec.mask_dim:
            out = out.masked_fill(self._rows(batch, MASK) < 0.5, FLOAT_MIN)
        return out.reshape(*lead, -1)

    def critic(self, batch: dict) -> tuple[torch.Tensor, torch.Tensor | None]:
        """Values ``[*lead]`` and the critic's next hidden state."""
        lead = self._lead(batch)
        z = self.vf_body(self.critic_input(batch))
        h = None
        if self.recurrent:
            h0 = batch[Columns.STATE_IN]["critic"]
            z, h = self._recur(self.vf_gru, z, h0, lead, batch.get(SEQ_RESETS))
            z = self.vf_gru_norm(z)
        return self.vf_out(z, batch).reshape(*lead), h

    def chunk_features(self, batch: dict) -> tuple[torch.Tensor, torch.Tensor]:
        """A chunked training batch (``SEQ_RESETS`` in it) through both bodies and both GRUs
        in one unroll (:func:`grus_unroll`): the actor's and the critic's features ``[N, H]``."""
        za = self.pi_body(self.actor_input(batch))
        zc = self.vf_body(self.critic_input(batch))
        h0 = torch.stack([batch[Columns.STATE_IN]["actor"], batch[Columns.STATE_IN]["critic"]])
        C = h0.shape[1]
        seq = torch.stack([za, zc]).view(2, C, len(za) // C, -1)
        resets = batch[SEQ_RESETS].view(seq.shape[1:3])
        out, _ = grus_unroll([self.pi_gru, self.vf_gru], seq, h0, resets)
        out = out.reshape(2, len(za), -1)
        return self.pi_gru_norm(out[0]), self.vf_gru_norm(out[1])

    # -- RLlib ----------------------------------------------------------------------------------

    @override(RLModule)
    def _forward(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        logits, h = self.actor(batch)
        out = {Columns.ACTION_DIST_INPUTS: logits}
        if self.recurrent:
            # The critic's state advances with the actor's, so sequences can start anywhere.
            _, hc = self.critic(batch)
            out[Columns.STATE_OUT] = {"actor": h, "critic": hc}
        return out

    @override(RLModule)
    def _forward_train(self, batch: dict[str, Any], **kwargs) -> dict[str, Any]:
        """The actor's outputs for the loss; a chunked recurrent batch's critic features
        come along as ``EMBEDDINGS`` (actor and critic unrolled together), which
        :meth:`compute_values` then reads, as RLlib's PPO loss passes them."""
        if self.recurrent and SEQ_RESETS in batch:
            za, zc = self.chunk_features(batch)
            logits = self.policy_head(za, batch, (len(za),))
            return {Columns.ACTION_DIST_INPUTS: logits, Columns.EMBEDDINGS: zc}
        return {Columns.ACTION_DIST_INPUTS: self.actor(batch)[0]}

    @override(ValueFunctionAPI)
    def compute_values(self, batch: dict[str, Any], embeddings: Any = None) -> torch.Tensor:
        if embeddings is not None:  # the critic's features from _forward_train
            return self.vf_out(embeddings, batch).reshape(len(embeddings))
        return self.critic(batch)[0]

    def step(self, obs: dict[str, torch.Tensor], state: dict | None):
        """One step of sampling for rows ``obs``: distribution inputs ``[N, A]`` and, when
        recurrent, the next state of actor and critic (``state``: their current one)."""
        batch = {Columns.OBS: obs}
        if not self.recurrent:
            return self.actor(batch)[0], None
        batch[Columns.STATE_IN] = state
        logits, h = self.actor(batch)
        return logits, {"actor": h, "critic": self.critic(batch)[1]}


def gru_unroll(gru: nn.GRU, seq: torch.Tensor, h0: torch.Tensor, resets: torch.Tensor):
    """``gru`` (one layer) over chunks ``seq`` ``[C, L, F]`` from ``h0`` ``[C, H]``, the state
    zeroed before step t of chunk c where ``resets[c, t]`` is 1; returns outputs ``[C, L, H]``
    and the last state (:func:`grus_unroll` of one GRU)."""
    out, h = grus_unroll([gru], seq[None], h0[None], resets)
    return out[0], h[0]


def grus_unroll(grus: list[nn.GRU], seq: torch.Tensor, h0: torch.Tensor, resets: torch.Tensor):
    """G one-layer GRUs of equal sizes side by side (actor and critic) over the same chunks:
    inputs ``seq`` ``[G, C, L, F]`` from ``h0`` ``[G, C, H]``, the state zeroed before step t
    of chunk c where ``resets[c, t]`` is 1, as MAPPO's ``onpolicy`` multiplies it by its masks
    (marlbenchmark/on-policy@de66d7a: onpolicy/algorithms/utils/rnn.py:38-70); returns
    outputs ``[G, C, L, H]`` and the last states ``[G, C, H]``. One step loop of torch's GRU
    equations for all G with a hand-written backward (:class:`_GRUChunks`): eager autograd
    through per-step GRU calls costs about twice as much at the learner's minibatch sizes."""
    keep = 1.0 - resets.to(seq.dtype)
    weights = [
        torch.stack([getattr(g, name) for g in grus])
        for name in ("weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0")
    ]
    out, h = _GRUChunks.apply(seq, h0, keep, *weights)
    return out.transpose(1, 2), h


class _GRUChunks(torch.autograd.Function):
    """G GRUs with torch's equations (gates r, z, n: ``n = tanh(W_in x + b_in + r * (W_hn h +
    b_hn))``, ``h' = (1 - z) * n + z * h``) over C chunks of L steps, the state multiplied by
    ``keep [C, L]`` before each step. Each step is one batched matmul and a few elementwise
    ops for all G; the input and weight gradients are one batched matmul each over all
    steps. Buffers are ``[G, L, C, ...]``, one allocation each way."""

    @staticmethod
    def forward(ctx, x, h0, keep, w_ih, w_hh, b_ih, b_hh):
        G, C, L, _ = x.shape
        H = h0.shape[-1]
        xt = x.transpose(1, 2).reshape(G, L * C, -1)
        gi = torch.baddbmm(b_ih[:, None], xt, w_ih.transpose(1, 2)).view(G, L, C, 3 * H)
        keep_t = keep.t()[None, :, :, None]  # [1, L, C, 1]
        # per step: the state it starts from, gates r and z, n, and W_hn h + b_hn
        saved = x.new_empty(G, L, C, 5 * H)
        hprev, rz, n, ghn = saved.split([H, 2 * H, H, H], -1)
        out = x.new_empty(G, L, C, H)
        w_hh_t, b_hh = w_hh.transpose(1, 2), b_hh[:, None]
        h = h0
        for t in range(L):
            h = torch.mul(h, keep_t[:, t], out=hprev[:, t])
            gh = torch.baddbmm(b_hh, h, w_hh_t)
            torch.sigmoid(gi[:, t, :, : 2 * H] + gh[..., : 2 * H], out=rz[:, t])
            ghn[:, t] = gh[..., 2 * H :]
            torch.tanh(torch.addcmul(gi[:, t, :, 2 * H :], rz[:, t, :, :H], ghn[:, t]), out=n[:, t])
            h = torch.addcmul(n[:, t], rz[:, t, :, H:], h - n[:, t], out=out[:, t])
        ctx.save_for_backward(xt, keep_t, w_ih, w_hh, saved)
        return out, h.clone()

    @staticmethod
    def backward(ctx, dout, dh_last):
        xt, keep_t, w_ih, w_hh, saved = ctx.saved_tensors
        G, L, C = saved.shape[:3]
        H = saved.shape[3] // 5
        hprev, rz, n, ghn = saved.split([H, 2 * H, H, H], -1)
        grads = xt.new_empty(G, L, C, 6 * H)  # per step: d(input gates), d(state gates)
        dgi, dgh = grads.split(3 * H, -1)
        dh = torch.zeros_like(hprev[:, 0]) if dh_last is None else dh_last
        for t in range(L - 1, -1, -1):
            if dout is not None:
                dh = dh + dout[:, t]
            r, z, nt = rz[:, t, :, :H], rz[:, t, :, H:], n[:, t]
            dn = torch.mul(dh * (1 - z), 1 - nt * nt, out=dgi[:, t, :, 2 * H :])
            torch.mul(dh * (hprev[:, t] - nt), z * (1 - z), out=dgi[:, t, :, H : 2 * H])
            torch.mul(dn * ghn[:, t], r * (1 - r), out=dgi[:, t, :, :H])
            dgh[:, t, :, : 2 * H] = dgi[:, t, :, : 2 * H]
            torch.mul(dn, r, out=dgh[:, t, :, 2 * H :])
            dh = torch.baddbmm(dh * z, dgh[:, t], w_hh) * keep_t[:, t]
        dgi, dgh = dgi.reshape(G, L * C, 3 * H), dgh.reshape(G, L * C, 3 * H)
        dx = None
        if ctx.needs_input_grad[0]:
            dx = torch.bmm(dgi, w_ih).view(G, L, C, -1).transpose(1, 2)
        dw_ih = torch.bmm(dgi.transpose(1, 2), xt)
        dw_hh = torch.bmm(dgh.transpose(1, 2), hprev.reshape(G, L * C, H))
        return dx, dh, None, dw_ih, dw_hh, dgi.sum(1), dgh.sum(1)
