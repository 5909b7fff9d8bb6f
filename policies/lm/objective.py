"""GRPO's pieces as plain tensor functions: group-relative advantages, the clipped surrogate,
the k3 KL estimate and the loss aggregations (checked against hand-computed cases in tests).

- Advantage of an episode ``i`` of group ``g``: ``r_i - mean_g(r)``, divided by the group's
  Bessel std (+1e-4, as TRL) when ``std_normalise``; a group whose rewards are all equal has
  zero advantage everywhere and is dropped when filtering (DAPO's dynamic sampling, the
  web-agent study's "zero-advantage filtering").
- Multi-turn credit: every action turn of an episode gets the episode's advantage (PipelineRL);
  with ``discount`` < 1 the turn ``k`` steps before the end gets ``discount**k`` of it.
- Dense step rewards (a process reward model's, ``policies.prm``): DeepSeekMath's process
  supervision (section 4.1.3): a group's step rewards are normalised by the mean and std of all
  of them, and a turn's process advantage is the sum of the normalised rewards of it and the
  turns after it; it is added, times a weight, to the turn's outcome advantage (PRIME, Cui et
  al. 2025, sums the two advantages alike).
- Token loss ``-min(rho A, clip(rho, 1 - eps_low, 1 + eps_high) A) + beta k3`` with
  ``k3 = pi_ref/pi - log(pi_ref/pi) - 1`` (DeepSeekMath; Schulman's k3 estimator).
- Aggregation (TRL's ``loss_type``, verl's ``loss_agg_mode``):
  ``token-mean`` = sum over all tokens / their count (DAPO);
  ``seq-mean-token-mean`` = mean over sequences of each sequence's token mean (the original
  GRPO, length-biased); ``constant`` = sum / (sequences x max_new_tokens) (Dr. GRPO).
"""

from __future__ import annotations

import numpy as np
import torch

AGGREGATIONS = ("token-mean", "seq-mean-token-mean", "constant")


def group_advantages(
    rewards: np.ndarray, groups: np.ndarray, std_normalise: bool, eps: float = 1e-4
) -> tuple[np.ndarray, np.ndarray]:
    """Per-episode advantages and, per episode, whether its group's rewards all agree.

    Args:
        rewards: ``[E]`` episode rewards. groups: ``[E]`` group ids (any integers).
        std_normalise: divide by the group's Bessel standard deviation (+``eps``).
    """
    rewards = np.asarray(rewards, np.float64)
    groups = np.asarray(groups)
    _, inverse, counts = np.unique(groups, return_inverse=True, return_counts=True)
    sums = np.bincount(inverse, rewards)
    mean = (sums / counts)[inverse]
    adv = rewards - mean
    sq = np.bincount(inverse, adv**2)
    std = np.sqrt(sq / np.maximum(counts - 1, 1))[inverse]
    flat = np.bincount(inverse, np.abs(adv))[inverse] == 0
    if std_normalise:
        adv = adv / (std + eps)
    return adv, flat


def process_advantages(
    step_rewards: list[list[float]], groups: np.ndarray, eps: float = 1e-4
) -> tuple[list[np.ndarray], np.ndarray]:
    """Per episode, each turn's process advantage, and per episode whether its group's step
    rewards all agree (then every process advantage is 0).

    Args:
        step_rewards: each episode's reward per turn. groups: ``[E]`` group ids.
    """
    groups = np.asarray(groups)
    out: list[np.ndarray] = [np.zeros(0)] * len(step_rewards)
    flat = np.zeros(len(step_rewards), bool)
    for g in np.unique(groups):
        members = np.flatnonzero(groups == g)
        pooled = np.concatenate([np.asarray(step_rewards[i], np.float64) for i in members])
        mean = pooled.mean() if pooled.size else 0.0
        std = pooled.std(ddof=1) if pooled.size > 1 else 0.0
        agree = bool(pooled.size == 0 or np.all(pooled == pooled[0]))
        for i in members:
            normalised = (np.asarray(step_rewards[i], np.float64) - mean) / (std + eps)
            out[i] = np.zeros(len(step_rewards[i])) if agree else normalised[::-1].cumsum()[::-1]
            flat[i] = agree
    return out, flat


def turn_advantages(adv: float, turns: int, discount: float) -> list[float]:
    """The advantage of each of an episode's ``turns`` action turns."""
    return [adv * discount ** (turns - 1 - k) for k in range(turns)]


def k3(logp: torch.Tensor, ref_logp: torch.Tensor) -> torch.Tensor:
    """Schulman's k3 estimate of KL(pi || pi_ref) per token (>= 0)."""
    d = ref_logp - logp
    return torch.exp(d) - d - 1


def surrogate(
    logp: torch.Tensor,
    old_logp: torch.Tensor,
    adv: torch.Tensor,
    eps_low: float,
    eps_high: float,
    clip: bool,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """``(token loss, ratio, clipped)``: the negated (clipped) surrogate per token, the
    importance ratio, and where clipping changed the objective."""
    ratio = torch.exp(logp - old_logp)
    plain = ratio * adv
    if not clip:
        return -plain, ratio, torch.zeros_like(plain, dtype=torch.bool)
    clipped = torch.clamp(ratio, 1 - eps_low, 1 + eps_high) * adv
    obj = torch.minimum(plain, clipped)
    return -obj, ratio, clipped < plain


def aggregate(
    token_loss: torch.Tensor, seq: torch.Tensor, num_seqs: int, mode: str, max_tokens: int
) -> torch.Tensor:
    """Reduces per-token losses (flat, with ``seq`` their sequence index) to one loss."""
    if mode == "token-mean":
        return token_loss.sum() / max(token_loss.numel(), 1)
    if mode == "seq-mean-token-mean":
        sums = torch.zeros(num_seqs, dtype=token_loss.dtype, device=token_loss.device)
        sums = sums.index_add(0, seq, token_loss)
        counts = torch.bincount(seq, minlength=num_seqs).clamp(min=1)
        return (sums / counts).mean()
    if mode == "constant":
        return token_loss.sum() / (num_seqs * max_tokens)
    raise ValueError(f"loss aggregation must be one of {', '.join(AGGREGATIONS)}, got {mode!r}")


def lm_loss(
    logp: torch.Tensor,
    entropy: torch.Tensor,
    batch: dict[str, torch.Tensor],
    cfg: dict,
    ref_logp: torch.Tensor | None = None,
) -> tuple[torch.Tensor, dict]:
    """One batch's loss and what to log: behaviour cloning's cross-entropy on the answer
    tokens (``cfg["mode"] == "bc"``) or GRPO's clipped surrogate, plus ``beta`` k3 to
    ``ref_logp`` when given.

    Args:
        logp, entropy: the student's values at the answer tokens (``Student.token_logps``).
        batch: ``policies.lm.turns.turn_batch``'s arrays as tensors on the student's device.
        cfg: ``mode``, ``loss_agg``, ``max_new_tokens``; for GRPO ``eps_low``, ``eps_high``,
            ``clip`` and ``beta``.
    """
    where = batch["targets"][:, 1:].bool()
    seq = torch.nonzero(where)[:, 0]
    B = batch["tokens"].shape[0]
    log = {"entropy": entropy.mean(), "tokens": float(logp.numel())}
    if cfg["mode"] == "bc":
        loss = aggregate(-logp, seq, B, cfg["loss_agg"], cfg["max_new_tokens"])
        log["policy_loss"] = loss
        return loss, log
    old = batch["old_logp"][:, 1:][where]
    adv = batch["advantage"][seq]
    tok_loss, ratio, clipped = surrogate(
        logp, old, adv, cfg["eps_low"], cfg["eps_high"], cfg["clip"]
    )
    if ref_logp is not None:
        kl = k3(logp, ref_logp)
        tok_loss = tok_loss + cfg["beta"] * kl
        log["kl_ref"] = kl.mean()
    loss = aggregate(tok_loss, seq, B, cfg["loss_agg"], cfg["max_new_tokens"])
    log.update(
        policy_loss=loss,
        ratio_mean=ratio.mean(),
        clip_fraction=clipped.float().mean(),
        kl_old=(old - logp).mean(),  # k1 estimate of KL(old || new)
    )
    return loss, log
