"""PPO's Learner on the array path: the whole epoch and minibatch loop in one function.

RLlib's ``Learner.update`` wraps every minibatch in Python bookkeeping (a cyclic iterator that
slices a ``MultiAgentBatch``, tensor conversion, metrics logged per minibatch, a summed loss
over modules). For the array path's batches (``policies.ppo.array_path``)
:meth:`ArrayPPOLearner.update` instead converts each module's batch to tensors once, permutes
it once per epoch (one gather per column; a recurrent module's batch by whole chunks), takes
minibatches as contiguous views and keeps statistics of the last minibatch only (what
RLlib's ``window=1`` logging keeps). The number of minibatches is
``round(rows / minibatch_size)``, or ``num_minibatches`` where set, of equal size (as CleanRL
and JaxMARL split a batch).

The loss is PPO's clipped surrogate with the value loss and advantage scope of the field's
reference implementations (CleanRL's ``ppo.py``, JaxMARL's ``baselines/IPPO``, MAPPO's
``onpolicy``) by default, RLlib's by name (:class:`LossSettings`).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import gymnasium as gym
import numpy as np
import torch
from ray.rllib.algorithms.ppo.ppo import (
    LEARNER_RESULTS_KL_KEY,
    LEARNER_RESULTS_VF_EXPLAINED_VAR_KEY,
    LEARNER_RESULTS_VF_LOSS_UNCLIPPED_KEY,
)
from ray.rllib.algorithms.ppo.torch.ppo_torch_learner import PPOTorchLearner
from ray.rllib.core.columns import Columns
from ray.rllib.core.learner.learner import ENTROPY_KEY, POLICY_LOSS_KEY, VF_LOSS_KEY
from ray.rllib.evaluation.postprocessing import Postprocessing
from ray.rllib.utils.metrics import (
    ALL_MODULES,
    MODULE_TRAIN_BATCH_SIZE_MEAN,
    NUM_ENV_STEPS_TRAINED,
    NUM_ENV_STEPS_TRAINED_LIFETIME,
    NUM_MODULE_STEPS_TRAINED,
    NUM_MODULE_STEPS_TRAINED_LIFETIME,
    WEIGHTS_SEQ_NO,
)

from policies.value_norm import value_norm_of

VALUE_CLIPS = ("change", "loss", "none")
VALUE_LOSSES = ("squared", "huber")
THREADS_KEY = "learner_threads"
"""Where ``PPOSettings.learner_threads`` travels in RLlib's ``learner_config_dict``."""
MINIBATCHES_KEY = "num_minibatches"
"""Where ``PPOSettings.num_minibatches`` travels (0: minibatches of ``minibatch_size``)."""
ADVANTAGE_NORMS = ("minibatch", "batch", "active_batch", "none")
ACTIVE = "active_mask"
"""The training batch's column of per-row active masks (1: the agent was alive at the row's
observation; 0: a dead agent stepping on with no-ops). Batches without it count every row."""


@dataclass(frozen=True)
class LossSettings:
    """The choices where PPO implementations differ (``PPOSettings`` carries them)."""

    value_clip: str = "change"
    """``change``: the new value may move at most ``vf_clip_param`` from the sampled one, and
    the loss is half the larger of the clipped and unclipped squared errors (PPO2, CleanRL,
    JaxMARL, MAPPO); ``loss``: RLlib's squared error clamped at ``vf_clip_param`` (no gradient
    beyond it); ``none``: the plain squared error."""
    advantage_norm: str = "minibatch"
    """Where advantages are standardised: per ``minibatch`` (CleanRL, JaxMARL), over the
    whole ``batch`` (RLlib), over the batch's active rows (``active_batch``: mean and
    population std of the rows whose active mask is 1, std + 1e-5; MAPPO,
    marlbenchmark/on-policy@de66d7a: onpolicy/algorithms/r_mappo/r_mappo.py:179-187), or
    ``none``."""
    value_loss: str = "squared"
    """The value error's loss: ``squared`` (half the square) or ``huber`` (on-policy's
    ``huber_loss`` with ``huber_delta``, onpolicy/utils/util.py:23-26); either is clipped as
    ``value_clip`` says (``huber`` with ``change`` or ``none``)."""
    huber_delta: float = 10.0
    policy_active_masks: bool = False
    """Policy loss and entropy are means over the active rows only (on-policy's
    ``use_policy_active_masks``, r_mappo.py:134-137, act.py:166)."""
    value_active_masks: bool = False
    """The value loss is a mean over the active rows only (``use_value_active_masks``,
    r_mappo.py:84-85)."""
    grad_clip_per_network: bool = False
    """Clip the actor's and the critic's gradients to ``grad_clip`` apart (MAPPO's separate
    actor and critic optimisers, each clipped at ``max_grad_norm``, r_mappo.py:143-167), not
    their joint norm."""
    adam_eps: float = 1e-5
    """Adam's epsilon (CleanRL, JaxMARL: 1e-5; torch's and RLlib's default: 1e-8)."""
    vf_clip_param: float = 0.2
    clip_param: float = 0.2
    vf_loss_coeff: float = 0.5
    grad_clip: float = 0.5
    use_kl_loss: bool = False

    KEY = "ppo_loss"
    """Where the settings travel in RLlib's ``learner_config_dict``."""

    @classmethod
    def of(cls, config) -> LossSettings:
        return cls(**config.learner_config_dict.get(cls.KEY, {}))

    def as_dict(self) -> dict:
        return asdict(self)


def standardised(x: torch.Tensor) -> torch.Tensor:
    """``x`` standardised along its last axis (each seed's rows apart)."""
    return (x - x.mean(-1, keepdim=True)) / (x.std(-1, keepdim=True) + 1e-8)


def seeds_of(module) -> int:
    """How many seeds a module stacks (``model.seeds``; 1 for any other module)."""
    return getattr(getattr(module, "settings", None), "seeds", 1)


def clip_per_seed(params: list[torch.Tensor], max_norm: float, seeds: int) -> None:
    """Global-norm clipping of each seed's gradients apart (parameters lead with the seed)."""
    grads = [p.grad for p in params if p.grad is not None]
    norms = sum(g.reshape(seeds, -1).pow(2).sum(1) for g in grads).sqrt()
    scale = (max_norm / (norms + 1e-6)).clamp(max=1.0)
    for g in grads:
        g.mul_(scale.view(seeds, *[1] * (g.dim() - 1)))


def clip_groups(module, params: list[torch.Tensor], per_network: bool) -> list[list[torch.Tensor]]:
    """The parameter groups whose gradient norms are clipped apart: all of ``params`` as one,
    or (``per_network``) the critic's (``vf_*``) and the rest, the actor's."""
    if not per_network:
        return [params]
    critic = {id(p) for name, p in module.named_parameters() if name.startswith("vf_")}
    groups = [[p for p in params if id(p) not in critic], [p for p in params if id(p) in critic]]
    return [g for g in groups if g]


def huber(error: torch.Tensor, delta: float) -> torch.Tensor:
    """on-policy's ``huber_loss`` (marlbenchmark/on-policy@de66d7a: onpolicy/utils/util.py:23-26):
    half the square within ``delta``, linear beyond."""
    a = error.abs()
    return torch.where(a <= delta, error**2 / 2, delta * (a - delta / 2))


def masked_mean(x: torch.Tensor, active: torch.Tensor | None) -> torch.Tensor:
    """The mean of ``x`` over the rows whose ``active`` mask is 1 (all rows when None), as
    on-policy averages its masked losses: ``(x * mask).sum() / mask.sum()`` (0, not NaN, for a
    minibatch of dead agents alone)."""
    if active is None:
        return x.mean()
    return (x * active).sum() / active.sum().clamp(min=1.0)


def value_loss(values, sampled, targets, loss: LossSettings, active=None) -> torch.Tensor:
    """The value loss of ``values`` against ``targets`` (``sampled``: the values the rollout
    saw, the reference of the ``change`` clip; ``active``: the rows the mean is over, None:
    all). With ``value_loss="huber"`` and ``value_clip="change"`` this is on-policy's
    ``cal_value_loss`` (onpolicy/algorithms/r_mappo/r_mappo.py:52-87)."""
    if loss.value_clip == "loss":
        return masked_mean(((values - targets) ** 2).clamp(0, loss.vf_clip_param), active)
    if loss.value_loss == "huber":
        error = lambda v: huber(targets - v, loss.huber_delta)  # noqa: E731
    else:
        error = lambda v: (targets - v) ** 2 / 2  # noqa: E731
    out = error(values)
    if loss.value_clip == "change":
        moved = sampled + (values - sampled).clamp(-loss.vf_clip_param, loss.vf_clip_param)
        out = torch.max(out, error(moved))
    elif loss.value_loss == "squared":
        out = out * 2  # the unclipped squared error is not halved (RLlib's, CleanRL's)
    return masked_mean(out, active)


def active_standardised(adv: torch.Tensor, active: torch.Tensor | None) -> torch.Tensor:
    """``adv`` standardised by the mean and population std of its active rows, std + 1e-5
    (on-policy's ``np.nanmean``/``np.nanstd`` with dead rows as NaN, r_mappo.py:179-187)."""
    if active is None:
        active = torch.ones_like(adv)
    keep = active > 0
    mean = adv[keep].mean()
    std = ((adv[keep] - mean) ** 2).mean().sqrt()
    return (adv - mean) / (std + 1e-5)


class ArrayPPOLearner(PPOTorchLearner):
    """RLlib's torch PPO learner with one fused update for the array path's batches (flat
    rows, or a recurrent module's chunks)."""

    def configure_optimizers_for_module(self, module_id, config=None) -> None:
        params = self.get_parameters(self._module[module_id])
        eps = LossSettings.of(self.config).adam_eps
        self.register_optimizer(
            module_id=module_id,
            optimizer=torch.optim.Adam(params, eps=eps, foreach=True),
            params=params,
            lr_or_lr_schedule=config.lr,
        )

    def update(
        self, *, training_data=None, timesteps=None, num_epochs=1, minibatch_size=None, **kw
    ):
        batch = None
        if training_data is not None and training_data.batch_refs is not None:
            training_data.solve_refs()
        if training_data is not None and training_data.episodes is None:
            batch = training_data.batch
        if batch is None:  # episodes or data iterators: RLlib's path
            return super().update(
                training_data=training_data,
                timesteps=timesteps,
                num_epochs=num_epochs,
                minibatch_size=minibatch_size,
                **kw,
            )
        self._check_is_built()
        unknown = set(batch.policy_batches) - set(self.module.keys())
        if unknown:
            raise ValueError(f"the batch has modules {sorted(unknown)} this Learner lacks")
        self.before_gradient_based_update(timesteps=timesteps or {})
        self._weights_seq_no += 1
        loss = LossSettings.of(self.config)
        threads = torch.get_num_threads()
        # stacked seeds' matmuls are large enough to share out (one seed's are not)
        torch.set_num_threads(self.config.learner_config_dict.get(THREADS_KEY, threads))
        try:
            for mid, rows in batch.policy_batches.items():
                if self.should_module_be_updated(mid, batch):
                    self._fit(mid, rows, loss, num_epochs, minibatch_size or len(rows))
        finally:
            torch.set_num_threads(threads)  # the driver samples on one thread
        self.metrics.log_value(
            (ALL_MODULES, NUM_ENV_STEPS_TRAINED), batch.env_steps(), reduce="sum"
        )
        self.metrics.log_value(
            (ALL_MODULES, NUM_ENV_STEPS_TRAINED_LIFETIME),
            batch.env_steps(),
            reduce="lifetime_sum",
        )
        self.after_gradient_based_update(timesteps=timesteps or {})
        return self.metrics.reduce()

    def _fit(self, mid: str, rows, loss: LossSettings, num_epochs: int, minibatch_size: int):
        """``num_epochs`` passes of minibatch SGD on one module's flat batch ``rows``.

        A module of S stacked seeds (``model.seeds``, rows in S contiguous blocks) trains each
        seed as its own run: every minibatch holds ``minibatch_size`` rows of each seed, in
        blocks, the loss is the sum of the seeds' losses, and gradients are clipped per seed.
        A recurrent module's batch is whole chunks (``policies.ppo.array_path.chunked``):
        minibatches are sets of chunks, about ``minibatch_size`` rows each, that the loss sees
        as flat rows with the chunks' ``STATE_IN`` (:func:`_chunk_rows`).
        """
        module = self.module[mid]
        optimizer = self.get_optimizer(mid)
        params = [p for g in optimizer.param_groups for p in g["params"]]
        module.train()
        seeds = seeds_of(module.unwrapped())
        data = self._tensors(rows)
        adv = data[Postprocessing.ADVANTAGES]
        if loss.advantage_norm == "batch":
            data[Postprocessing.ADVANTAGES] = standardised(adv.view(seeds, -1)).view_as(adv)
        elif loss.advantage_norm == "active_batch":  # one seed (model.value_norm etc. refuse more)
            data[Postprocessing.ADVANTAGES] = active_standardised(adv, data.get(ACTIVE))
        # the units minibatches are made of: rows, or a recurrent module's chunks [C, L]
        n = len(adv) // seeds  # units of each seed
        steps = adv[0].numel()  # rows per unit
        parts = self.config.learner_config_dict.get(MINIBATCHES_KEY, 0)
        parts = min(n, parts or max(1, round(n * steps / minibatch_size)))  # whole units
        bounds = [(int(c[0]), int(c[-1]) + 1) for c in torch.arange(n).tensor_split(parts)]
        entropy_coeff = self.entropy_coeff_schedulers_per_module[mid].get_current_value()
        kl_coeff = self.curr_kl_coeffs_per_module[mid] if loss.use_kl_loss else None
        offsets = torch.arange(seeds)[:, None] * n
        groups = clip_groups(module.unwrapped(), params, loss.grad_clip_per_network)
        for epoch in range(num_epochs):
            # each seed's rows shuffled apart; minibatch j = seed blocks of chunk j, in a row
            order = torch.argsort(torch.rand(seeds, n), dim=1) + offsets
            shuffled = _gather(data, torch.cat([order[:, a:b].reshape(-1) for a, b in bounds]))
            last_epoch = epoch == num_epochs - 1
            for i, (a, b) in enumerate(bounds):
                mb = _gather(shuffled, slice(seeds * a, seeds * b))
                if steps > 1:
                    mb = _chunk_rows(mb)
                log = last_epoch and i == parts - 1
                total, stats = self.ppo_loss(module, mb, loss, entropy_coeff, kl_coeff, log)
                optimizer.zero_grad(set_to_none=True)
                (total * seeds).backward()  # each seed's gradient is that of its own mean loss
                if seeds == 1:
                    for group in groups:
                        torch.nn.utils.clip_grad_norm_(group, loss.grad_clip, foreach=True)
                else:
                    clip_per_seed(params, loss.grad_clip, seeds)
                optimizer.step()
        self.metrics.log_dict({k: v.item() for k, v in stats.items()}, key=mid, window=1)
        self.metrics.log_value((mid, self.TOTAL_LOSS_KEY), total.item(), window=1)
        self._log_rows(mid, n * steps * seeds, num_epochs, parts)

    def ppo_loss(self, module, mb: dict, loss: LossSettings, entropy_coeff, kl_coeff, log):
        """PPO's loss on minibatch ``mb`` and (when ``log``) its statistics."""
        inner = module.unwrapped()
        # a module wrapped for DDP needs its own forward (the gradient all-reduce hooks)
        out = (module.forward_train if module is not inner else inner._forward_train)(mb)
        logits = out[Columns.ACTION_DIST_INPUTS]
        dist = _distribution(inner, logits)
        ratio = torch.exp(dist.logp(mb[Columns.ACTIONS]) - mb[Columns.ACTION_LOGP])
        adv = mb[Postprocessing.ADVANTAGES]
        if loss.advantage_norm == "minibatch":
            adv = standardised(adv.view(seeds_of(inner), -1)).view(-1)
        clip = loss.clip_param
        active = mb.get(ACTIVE)
        pi_rows = active if loss.policy_active_masks else None
        vf_rows = active if loss.value_active_masks else None
        surrogate = masked_mean(
            torch.min(adv * ratio, adv * ratio.clamp(1 - clip, 1 + clip)), pi_rows
        )
        values = inner.compute_values(mb, embeddings=out.get(Columns.EMBEDDINGS))
        targets = mb[Postprocessing.VALUE_TARGETS]
        norm = value_norm_of(inner)
        if norm is not None:  # the critic predicts normalised values (r_mappo.py:64-67)
            norm.update(targets)
            targets = norm.normalize(targets)
        vf_loss = value_loss(values, mb.get(Columns.VF_PREDS), targets, loss, vf_rows)
        entropy = masked_mean(dist.entropy(), pi_rows)
        total = -surrogate + loss.vf_loss_coeff * vf_loss - entropy_coeff * entropy
        kl = None
        if kl_coeff is not None:
            old_logits = mb[Columns.ACTION_DIST_INPUTS]
            old_dist = _distribution(inner, old_logits)
            kl = old_dist.kl(dist).mean()
            total = total + kl_coeff * kl
        if not log:
            return total, {}
        with torch.no_grad():
            var = targets.var()
            stats = {
                POLICY_LOSS_KEY: -surrogate,
                VF_LOSS_KEY: vf_loss,
                LEARNER_RESULTS_VF_LOSS_UNCLIPPED_KEY: ((values - targets) ** 2).mean(),
                LEARNER_RESULTS_VF_EXPLAINED_VAR_KEY: 1 - (targets - values).var() / var
                if var > 0
                else torch.tensor(float("nan")),
                ENTROPY_KEY: entropy,
                LEARNER_RESULTS_KL_KEY: kl if kl is not None else torch.zeros(()),
            }
        return total, {k: v.detach() for k, v in stats.items()}

    def _tensors(self, rows) -> dict:
        """A module's numpy batch as (nested) torch tensors on the Learner's device."""

        def convert(x):
            if isinstance(x, dict):
                return {k: convert(v) for k, v in x.items()}
            return torch.from_numpy(np.ascontiguousarray(x)).to(self._device)

        return {k: convert(v) for k, v in rows.items()}

    def _log_rows(self, mid: str, n: int, num_epochs: int, parts: int) -> None:
        """Steps trained, as RLlib logs them per minibatch (``n`` rows, ``num_epochs`` passes)."""
        trained = n * num_epochs
        log = self.metrics.log_value
        log((mid, WEIGHTS_SEQ_NO), self._weights_seq_no, window=1)
        log((mid, MODULE_TRAIN_BATCH_SIZE_MEAN), n / parts, reduce="mean")
        log((mid, NUM_MODULE_STEPS_TRAINED), trained, reduce="sum")
        log((mid, NUM_MODULE_STEPS_TRAINED_LIFETIME), trained, reduce="lifetime_sum")
        log((ALL_MODULES, NUM_MODULE_STEPS_TRAINED), trained, reduce="sum")
        log((ALL_MODULES, NUM_MODULE_STEPS_TRAINED_LIFETIME), trained, reduce="lifetime_sum")


class _Categorical:
    """The log-probabilities and entropy of logits, without ``torch.distributions``'
    argument checks (their cost is the size of the loss itself at these batch sizes)."""

    def __init__(self, logits: torch.Tensor):
        self.logp_all = torch.log_softmax(logits, -1)

    def logp(self, actions: torch.Tensor) -> torch.Tensor:
        return self.logp_all.gather(-1, actions.long()[..., None])[..., 0]

    def entropy(self) -> torch.Tensor:
        p = self.logp_all.exp()
        # illegal actions have logit FLOAT_MIN: probability 0, no term
        return -(p * self.logp_all.masked_fill(p == 0, 0.0)).sum(-1)

    def kl(self, other: _Categorical) -> torch.Tensor:
        p = self.logp_all.exp()
        return (p * (self.logp_all - other.logp_all).masked_fill(p == 0, 0.0)).sum(-1)


def _distribution(module, logits: torch.Tensor):
    if isinstance(module.action_space, gym.spaces.Discrete):
        return _Categorical(logits)
    return module.get_train_action_dist_cls().from_logits(logits)


def _chunk_rows(mb: dict) -> dict:
    """A minibatch of chunks ``[c, L, ...]`` as flat rows ``[c * L, ...]`` (views), the
    chunks' ``STATE_IN`` ``[c, H]`` as they are: the module unrolls c chunks of L steps."""

    def flat(x):
        if isinstance(x, dict):
            return {k: flat(v) for k, v in x.items()}
        return x.reshape(-1, *x.shape[2:])

    return {k: v if k == Columns.STATE_IN else flat(v) for k, v in mb.items()}


def _gather(data: dict, index) -> dict:
    """Every (nested) column of ``data`` at ``index`` (a permutation or a slice)."""
    return {k: _gather(v, index) if isinstance(v, dict) else v[index] for k, v in data.items()}
