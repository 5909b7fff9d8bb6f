"""Replaying recorded episodes through an offline learner's action decoder."""

import torch


def decoder_accuracy(decoder, b: dict, skills: torch.Tensor, steps: int) -> float:
    """The share of recorded actions other than no-op (action 0) that ``decoder`` picks when
    fed the recorded history and ``skills [B, L, A, k]``, over the first ``steps`` steps of the
    batch ``b`` (``tokens``, ``actions``, ``acted``)."""
    B, _, A = b["actions"].shape
    hidden = decoder.initial_state(B * A)
    last, hits, count = torch.full((B, A), -1), 0.0, 0.0
    with torch.no_grad():
        for t in range(steps):
            step = {k: v[:, t] for k, v in b["tokens"].items()}
            logits, hidden = decoder(step, last, hidden, skills[:, t].reshape(B * A, -1))
            keep = b["acted"][:, t, None].bool() & (b["actions"][:, t] != 0)
            hits += float(((logits.argmax(-1) == b["actions"][:, t]) & keep).sum())
            count += float(keep.sum())
            last = b["actions"][:, t]
    return hits / count
