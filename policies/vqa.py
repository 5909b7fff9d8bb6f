"""A small vision-language baseline for the walking dataset's VQA (``arena vqa train`` /
``arena vqa predict``): the first learned row beside the majority and random rows of
``arena mmwalk eval-vqa``.

The model chooses among answer candidates, as a VQA classifier does: a CNN reads the four
pictures of a question (walker, drone and dog RGB and the walker depth, each resized to 64 x
32 and stacked as 10 channels), a bag-of-words encoder reads the question, and an MLP over
both scores every answer the training split gave to that question (every answer of the
category for a question never seen in training). Trained with cross-entropy on the train
split; nothing is pretrained or downloaded.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
import torch
from torch import nn

from envs.files import replacing

IMAGE = (32, 64)  # height, width of each resized picture
CHANNELS = 10  # three RGB pictures and one depth


@dataclass
class VQASettings:
    epochs: int = 8
    lr: float = 1e-3
    batch_size: int = 64
    embed: int = 64
    hidden: int = 256
    seed: int = 0


def _words(text: str) -> list[str]:
    return re.findall(r"[a-z0-9']+", text.lower())


def _question(record: dict) -> str:
    text = record["conversation"][0]["content"][-1]["text"]
    return text.split("Question:", 1)[1].strip()


def _answer(record: dict) -> str:
    return record["conversation"][1]["content"][0]["text"].strip()


def load_split(dataset: Path, split: str) -> list[dict]:
    d = dataset / f"{split}_data_chat"
    if not d.is_dir():
        raise FileNotFoundError(f"{dataset}: no {split}_data_chat/ (run arena mmwalk generate)")
    rows = []
    for path in sorted(d.glob("*.jsonl")):
        rows += [json.loads(line) for line in path.open()]
    return rows


class Pictures:
    """The stacked, resized pictures of each (trajectory, frame), read once."""

    def __init__(self, dataset: Path, split_dir: str):
        self.root, self.split_dir, self.cache = dataset, split_dir, {}

    def __call__(self, record: dict) -> np.ndarray:
        key = (record.get("trajectory"), record.get("frame"))
        if key not in self.cache:
            from PIL import Image

            planes = []
            for item in record["conversation"][0]["content"][:4]:
                path = (self.root / self.split_dir / item["image"]).resolve()
                with Image.open(path) as im:
                    if im.mode in ("I;16", "I"):  # depth: metres x 256 -> 0-25.5 m in 8 bits
                        arr = np.asarray(im, np.float32) / 256.0
                        small = Image.fromarray(np.clip(arr * 10, 0, 255).astype(np.uint8))
                        planes.append(np.asarray(small.resize(IMAGE[::-1]))[..., None])
                    else:
                        planes.append(np.asarray(im.convert("RGB").resize(IMAGE[::-1])))
            self.cache[key] = np.concatenate(planes, -1)  # [H, W, 10] uint8
        return self.cache[key]


class VQAModel(nn.Module):
    def __init__(self, vocab: int, answers: int, s: VQASettings):
        super().__init__()
        self.conv = nn.Sequential(
            nn.Conv2d(CHANNELS, 16, 4, stride=2),
            nn.ReLU(),
            nn.Conv2d(16, 32, 3, stride=2),
            nn.ReLU(),
            nn.Conv2d(32, 32, 3, stride=2),
            nn.ReLU(),
            nn.Flatten(),
        )
        with torch.no_grad():
            flat = self.conv(torch.zeros(1, CHANNELS, *IMAGE)).shape[1]
        self.words = nn.EmbeddingBag(vocab, s.embed, mode="mean", padding_idx=0)
        self.head = nn.Sequential(
            nn.Linear(flat + s.embed, s.hidden), nn.ReLU(), nn.Linear(s.hidden, answers)
        )

    def forward(self, images: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
        x = self.conv(images.permute(0, 3, 1, 2).float() / 255.0)
        return self.head(torch.cat([x, self.words(tokens)], -1))


def _tokens(questions: list[str], vocab: dict[str, int]) -> torch.Tensor:
    ids = [[vocab.get(w, 1) for w in _words(q)] or [1] for q in questions]
    width = max(len(i) for i in ids)
    return torch.tensor([i + [0] * (width - len(i)) for i in ids])


def _candidates(rows: list[dict], answers: dict[str, int]) -> tuple[dict, dict]:
    """Allowed answer ids per question and per category (from the training rows)."""
    per_q: dict[str, set] = {}
    per_cat: dict[str, set] = {}
    for r in rows:
        a = answers[_answer(r)]
        per_q.setdefault(_question(r), set()).add(a)
        per_cat.setdefault(r["category"], set()).add(a)
    return per_q, per_cat


def _mask(rows: list[dict], n: int, per_q: dict, per_cat: dict) -> torch.Tensor:
    mask = torch.full((len(rows), n), float("-inf"))
    for i, r in enumerate(rows):
        allowed = per_q.get(_question(r)) or per_cat.get(r["category"]) or set(range(n))
        mask[i, list(allowed)] = 0.0
    return mask


def train(dataset: str | Path, out: str | Path, s: VQASettings | None = None, log=print) -> Path:
    """Trains the baseline on ``dataset``'s train split; writes ``out/model.pt`` and
    ``out/vocab.json`` (atomically)."""
    s = s or VQASettings()
    torch.manual_seed(s.seed)
    torch.set_num_threads(1)
    dataset, out = Path(dataset), Path(out)
    rows = load_split(dataset, "train")
    if not rows:
        raise ValueError(f"{dataset}: the train split has no questions")
    words = sorted({w for r in rows for w in _words(_question(r))})
    vocab = {w: i + 2 for i, w in enumerate(words)}  # 0 padding, 1 unknown
    answer_list = sorted({_answer(r) for r in rows})
    answers = {a: i for i, a in enumerate(answer_list)}
    pictures = Pictures(dataset, "train_data_chat")
    images = torch.from_numpy(np.stack([pictures(r) for r in rows]))
    tokens = _tokens([_question(r) for r in rows], vocab)
    target = torch.tensor([answers[_answer(r)] for r in rows])
    per_q, per_cat = _candidates(rows, answers)
    mask = _mask(rows, len(answers), per_q, per_cat)
    model = VQAModel(len(vocab) + 2, len(answers), s)
    opt = torch.optim.Adam(model.parameters(), lr=s.lr)
    gen = torch.Generator().manual_seed(s.seed)
    for epoch in range(s.epochs):
        order = torch.randperm(len(rows), generator=gen)
        total, right = 0.0, 0
        for b in order.split(s.batch_size):
            logits = model(images[b], tokens[b]) + mask[b]
            loss = nn.functional.cross_entropy(logits, target[b])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * len(b)
            right += int((logits.argmax(-1) == target[b]).sum())
        log(
            f"epoch {epoch + 1}/{s.epochs}: loss {total / len(rows):.3f}, "
            f"train accuracy {right / len(rows):.3f}"
        )
    out.mkdir(parents=True, exist_ok=True)
    meta = {
        "settings": asdict(s),
        "vocab": vocab,
        "answers": answer_list,
        "per_question": {q: sorted(v) for q, v in per_q.items()},
        "per_category": {c: sorted(v) for c, v in per_cat.items()},
    }
    for name, write in (
        ("vocab.json", lambda p: p.write_text(json.dumps(meta))),
        ("model.pt", lambda p: torch.save(model.state_dict(), p)),
    ):
        with replacing(out / name) as tmp:
            write(tmp)
    return out


def predict(run: str | Path, dataset: str | Path, out: str | Path, split: str = "test") -> Path:
    """Writes ``out/<category>.jsonl`` predictions for ``split``, line-aligned with the
    ground truth (the eval-vqa format)."""
    run, dataset, out = Path(run), Path(dataset), Path(out)
    meta = json.loads((run / "vocab.json").read_text())
    s = VQASettings(**meta["settings"])
    vocab, answer_list = meta["vocab"], meta["answers"]
    model = VQAModel(len(vocab) + 2, len(answer_list), s)
    model.load_state_dict(torch.load(run / "model.pt", weights_only=True))
    model.eval()
    per_q = {q: set(v) for q, v in meta["per_question"].items()}
    per_cat = {c: set(v) for c, v in meta["per_category"].items()}
    pictures = Pictures(dataset, f"{split}_data_chat")
    out.mkdir(parents=True, exist_ok=True)
    d = dataset / f"{split}_data_chat"
    for path in sorted(d.glob("*.jsonl")):
        rows = [json.loads(line) for line in path.open()]
        lines = []
        if rows:
            with torch.no_grad():
                images = torch.from_numpy(np.stack([pictures(r) for r in rows]))
                logits = model(images, _tokens([_question(r) for r in rows], vocab))
                logits = logits + _mask(rows, len(answer_list), per_q, per_cat)
            for r, k in zip(rows, logits.argmax(-1).tolist(), strict=True):
                pred = json.loads(json.dumps(r))
                pred["conversation"][1]["content"][0]["text"] = answer_list[k]
                lines.append(json.dumps(pred) + "\n")
        (out / path.name).write_text("".join(lines))
    return out
