"""Training a process reward model on ``arena web prm-data`` rows, and a meta-benchmark.

``arena prm train DATA --out RUN``: supervised fine-tuning of :class:`policies.prm.ProcessRewardModel`
(SmolLM2 with a LoRA adapter by default) on every candidate of every ``pairs.jsonl`` row (the
judge's answer: the statuses its action leads to) and on every first state's checklist. A plain
torch loop, not RLlib: the data is a fixed set of (prompt, answer) texts with no env to step,
so RLlib's EnvRunners would have nothing to run and its offline API (built for episodes of an
action space) would only wrap this loop. Checkpoints (the adapter and Adam's state) are
written atomically every ``checkpoint_every`` steps and the same command resumes; batches are
a function of (seed, step), so a resumed run repeats the same steps.

``arena prm bench RUN|base|random|outcome|oracle --data DIR``: the meta-benchmark, after
WebRewardBench (Web-Shepherd's ``src/utils/eval_utils.py``): on each state the chosen action
(``chosen[0]``) against its rejected ones, **accuracy** (the chosen outscores every rejected
one), **MRR** (the chosen's reciprocal rank, ties ranked below: ``get_acc_and_mrr``'s draw
penalty) and **trajectory accuracy** (a task instance counts when every one of its states is
right). The baselines: ``base`` is the untuned model with the same prompt (an LM judge with no
PRM training), ``random`` uniform scores, ``outcome`` the env's own reward for the action (what
an outcome-only signal says about a step: zero until the last), ``oracle`` the twin's labels
(the checklist reward of the statuses after the action, what the PRM is taught).

``arena prm best-of-n RUN --policy LM_RUN``: the PRM as a verifier at test time: at each step
a ``bc``/``grpo`` run's student samples n actions and the PRM's best is played, on held-out
seeds; success against n with each n's FLOPs (:func:`best_of_n`).
"""

from __future__ import annotations

import json
import math
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

from envs.files import replacing, write_atomic
from policies.lm.play import env_id_for
from policies.lm.student import LoRASettings, StudentSettings
from policies.prm import PRMError, build_prm, load_prm, step_response, step_state, task_checklist
from training.checkpoints import LOOP_CHECKPOINT, claim_loop_dir, load_loop, save_loop

__all__ = ["PRMError", "build_prm", "load_prm"]  # re-exported: `arena prm`'s callers use them

BASELINES = ("base", "random", "outcome", "oracle", "judge")


def _default_model() -> StudentSettings:
    return StudentSettings(kind="smollm2", max_prompt_tokens=1024, lora=LoRASettings(rank=8))


@dataclass
class PRMConfig:
    """``arena prm train`` settings."""

    model: StudentSettings = field(default_factory=_default_model)
    """The judge: SmolLM2 with a rank-8 LoRA adapter (``policies.lm.student``)."""
    steps: int = 300
    """Optimizer steps."""
    batch: int = 4
    """Examples per step."""
    lr: float = 1e-3
    """Adam's step size (LoRA wants about 1e-3; full fine-tuning about 1e-4)."""
    grad_clip: float = 1.0
    checklists: bool = True
    """Also learn to write the checklist from the first state (Web-Shepherd's second task)."""
    seed: int = 0
    checkpoint_every: int = 50

    def problems(self) -> list[str]:
        bad = [
            f"{k}={getattr(self, k)!r} (at least 1)"
            for k in ("steps", "batch", "checkpoint_every")
            if getattr(self, k) < 1
        ]
        if not (self.lr > 0 and math.isfinite(self.lr)):
            bad.append(f"lr={self.lr!r} (a positive number)")
        return bad + self.model.problems()

    def to_json(self) -> dict:
        return asdict(self)


def read_pairs(data: str | Path) -> list[dict]:
    """The rows of ``DATA/pairs.jsonl`` (``arena web prm-data``)."""
    path = Path(data) / "pairs.jsonl"
    if not path.is_file():
        raise PRMError(f"{data}: no pairs.jsonl (write one with `arena web prm-data --out DIR`)")
    rows = [json.loads(line) for line in path.open() if line.strip()]
    if not rows:
        raise PRMError(f"{path} has no rows")
    return rows


def examples(prm, rows: list[dict], checklists: bool) -> list:
    """Every candidate of every row as a judge example, then each task instance's checklist
    (from its first state) when ``checklists``."""
    out = [e for row in rows for e in prm.judge_examples(row)]
    if checklists:
        out += [prm.checklist_example(r) for r in rows if not r["action_history"]]
    return out


def batch_indices(n: int, batch: int, seed: int, step: int) -> list[int]:
    """The examples of optimizer step ``step``: epochs of seeded permutations, in order."""
    start = step * batch
    out = []
    while len(out) < batch:
        epoch, at = divmod(start + len(out), n)
        perm = np.random.default_rng([seed, epoch]).permutation(n)
        out += perm[at : at + batch - len(out)].tolist()
    return out


def train(
    data: str | Path,
    out: str | Path,
    cfg: PRMConfig,
    progress: Callable[[int, int, float], None] | None = None,
) -> dict:
    """Trains (or resumes) a PRM on ``data``'s pairs into ``out``; returns a summary."""
    import torch

    from policies.lm.student import base_reference, train_flops

    if bad := cfg.problems():
        raise PRMError("bad PRM settings: " + "; ".join(bad))
    out = Path(out)
    rows = read_pairs(data)
    # What a run is: more --steps (or another --checkpoint-every) continue it.
    same = {k: v for k, v in cfg.to_json().items() if k not in ("steps", "checkpoint_every")}
    spec = {"config": same, "data": str(Path(data).resolve())}
    claim_loop_dir(out, "prm.json", spec, "PRM", PRMError)
    torch.manual_seed(cfg.seed)  # no Ray here: torch's threads may use every core
    prm = build_prm(cfg.model, cfg.seed)
    student = prm.student
    pool = examples(prm, rows, cfg.checklists)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(out / "prm.json", json.dumps(spec | {"base": base_reference(cfg.model)}, indent=2))
    params = [p for p in student.model.parameters() if p.requires_grad]
    optim = torch.optim.Adam(params, lr=cfg.lr)
    state = {"step": 0, "losses": [], "seconds": 0.0, "tokens": 0, "flops": 0.0}
    blob, saved_state = load_loop(out)
    if blob is not None:
        student.load_checkpoint_state(blob["model"], str(out / LOOP_CHECKPOINT))
        optim.load_state_dict(blob["optim"])
        state = saved_state

    def save():
        save_loop(out, {"model": student.checkpoint_state(), "optim": optim.state_dict()}, state)

    window: list[float] = []
    t0 = time.perf_counter() - state["seconds"]
    while state["step"] < cfg.steps:
        step = state["step"]
        batch = [pool[i] for i in batch_indices(len(pool), cfg.batch, cfg.seed, step)]
        loss, tokens = prm.loss(batch)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
        optim.step()
        optim.zero_grad()
        window.append(loss.item())
        state["tokens"] += tokens
        state["flops"] += train_flops(student.params, tokens, student.trainable)
        state["step"] = step = step + 1
        if step == cfg.steps or step % cfg.checkpoint_every == 0:
            state["losses"].append([step, float(np.mean(window))])
            state["seconds"] = time.perf_counter() - t0
            window = []
            save()
            if progress:
                progress(step, cfg.steps, state["losses"][-1][1])
    return {
        "out": str(out),
        "steps": state["step"],
        "examples": len(pool),
        "loss": state["losses"][-1][1],
        "tokens": state["tokens"],
        "train_flops": state["flops"],
        "seconds": round(state["seconds"], 1),
    }


# --- the meta-benchmark ------------------------------------------------------------------------
def candidates(row: dict) -> list[dict]:
    """What a state is judged on: the chosen action first, then the rejected ones."""
    return [row["chosen"][0], *row["rejected"]]


def outcome_scores(row: dict) -> list[float]:
    """The env's own reward for each candidate, replayed on the twin from the row's state."""
    from envs.web.prm import start

    a = row["arena"]
    state = start(a["env"], a["seed"])
    for action in row["action_history"]:
        state.step(action)
    scores = []
    for c in candidates(row):
        sim = state.copy()
        _, rew, *_ = sim.env.step({"agent_0": c["action"]})
        scores.append(float(rew["agent_0"]))
    return scores


_JUDGED = re.compile(r"Checklist\s*(\d+)\s*:\s*\**\s*(Yes|In Progress|No)\b", re.I)


def text_reward(answer: str, n_items: int) -> tuple[float, int]:
    """A judge's written answer as a step reward (Web-Shepherd's ``get_score`` on the
    judgements it wrote: Yes 1, In Progress 0.5, No 0, averaged over the checklist's
    items) and how many items it left unjudged (those count as No). Judgements are read
    after ``CHECKLIST EVALUATION:`` when the answer has that line, else anywhere."""
    from policies.prm import EVALUATION, VALUE

    tail = answer.split(EVALUATION, 1)[-1]
    found: dict[int, str] = {}
    for k, label in _JUDGED.findall(tail):
        found.setdefault(int(k), label.title())  # "in progress" -> "In Progress"
    judged = [VALUE[found[k]] for k in range(1, n_items + 1) if k in found]
    return sum(judged) / max(n_items, 1), n_items - len(judged)


@dataclass
class ChatJudge:
    """An LM judge behind an OpenAI-compatible chat route (WebRewardBench's baselines are
    API models prompted alike): each candidate's Web-Shepherd prompt as one user message,
    answered greedily, its written judgements read by :func:`text_reward`."""

    url: str
    """The API's base, ``http://127.0.0.1:8000/v1`` (``arena serve smollm2``) or any other."""
    model: str
    api_key: str = ""
    max_tokens: int = 256
    timeout_s: float = 600.0
    items: int = 0
    """Checklist items asked about so far, and of them left unjudged:"""
    unjudged: int = 0
    tokens: int = 0
    """Prompt and completion tokens the server reported (its ``usage``)."""

    def ask(self, text: str) -> str:
        import urllib.error
        import urllib.request

        body = {
            "model": self.model,
            "messages": [{"role": "system", "content": ""}, {"role": "user", "content": text}],
            "temperature": 0,
            "max_tokens": self.max_tokens,
        }
        headers = {"Content-Type": "application/json"}
        if self.api_key:
            headers["Authorization"] = f"Bearer {self.api_key}"
        request = urllib.request.Request(
            self.url.rstrip("/") + "/chat/completions", json.dumps(body).encode(), headers
        )
        try:
            with urllib.request.urlopen(request, timeout=self.timeout_s) as reply:
                data = json.loads(reply.read())
        except urllib.error.HTTPError as e:
            detail = e.read().decode(errors="replace")[:300]
            raise PRMError(f"the judge at {self.url} answered {e.code}: {detail}") from None
        except (urllib.error.URLError, TimeoutError, ValueError) as e:
            raise PRMError(f"no answer from the judge at {self.url}: {e}") from None
        self.tokens += int(data.get("usage", {}).get("total_tokens", 0))
        return data["choices"][0]["message"]["content"]

    def scores(self, row: dict, responses: list[dict]) -> list[float]:
        from policies.prm import RESPONSE, items_of, judge_context

        context = judge_context(row, row["text_observation"])
        n = items_of(row["gt_checklist"])
        out = []
        for r in responses:
            reward, missing = text_reward(self.ask(context + RESPONSE.format(**r)), n)
            self.items, self.unjudged = self.items + n, self.unjudged + missing
            out.append(reward)
        return out


def scorer(which: str, model: StudentSettings | None = None, seed: int = 0, judge=None):
    """``row -> scores of candidates(row)`` for a run directory or a baseline name
    (``judge``: the :class:`ChatJudge` given)."""
    if which == "judge":
        if judge is None:
            raise PRMError("the judge baseline needs a chat route (--judge-url, --judge-model)")
        return lambda row: judge.scores(row, candidates(row))
    if which == "random":
        rng = np.random.default_rng(seed)
        return lambda row: rng.random(len(candidates(row))).tolist()
    if which == "outcome":
        return outcome_scores
    if which == "oracle":
        return lambda row: [c["reward"] for c in candidates(row)]
    import torch

    torch.set_num_threads(1)
    prm = build_prm(model or _default_model(), seed) if which == "base" else load_prm(which)
    return lambda row: prm.scores(row, candidates(row))


def rank_metrics(scores: list[float]) -> tuple[bool, float]:
    """(accuracy, reciprocal rank) of ``scores[0]`` (the chosen) among all, as WebRewardBench:
    right only when strictly above every rejected score; a tie ranks the chosen below."""
    chosen, rejected = scores[0], scores[1:]
    rank = 1 + sum(r > chosen for r in rejected) + sum(r == chosen for r in rejected)
    return all(chosen > r for r in rejected), 1.0 / rank


def cluster_ci(groups: list[list[float]], resamples: int = 2000, seed: int = 0) -> list[float]:
    """95% bootstrap interval of the mean over states, resampling whole task instances (the
    states of one episode are not independent)."""
    rng = np.random.default_rng(seed)
    sums = np.array([sum(g) for g in groups])
    counts = np.array([len(g) for g in groups])
    idx = rng.integers(0, len(groups), (resamples, len(groups)))
    means = sums[idx].sum(1) / counts[idx].sum(1)
    return [float(np.quantile(means, 0.025)), float(np.quantile(means, 0.975))]


def benchmark(rows: list[dict], score: Callable[[dict], list[float]], progress=None) -> dict:
    """WebRewardBench's metrics of ``score`` over ``rows`` (module doc), with intervals."""
    acc: dict[str, list[float]] = {}
    mrr: dict[str, list[float]] = {}
    by_env: dict[str, list[float]] = {}
    by_stage: dict[str, list[float]] = {"final": [], "earlier": []}
    states = []
    t0 = time.perf_counter()
    for i, row in enumerate(rows):
        scores = score(row)
        right, rr = rank_metrics(scores)
        # The chosen action finishes the task here: the only states where an outcome-only
        # reward can tell the chosen action from the others.
        final = row["arena"]["cost_to_go"] == 1
        by_stage["final" if final else "earlier"].append(float(right))
        states.append({"task_id": row["task_id"], "step_id": row["step_id"], "final": final,
                       "scores": scores, "right": right})  # fmt: skip
        acc.setdefault(row["task_id"], []).append(float(right))
        mrr.setdefault(row["task_id"], []).append(rr)
        by_env.setdefault(row["task_id"].rsplit(":", 1)[0], []).append(float(right))
        if progress:
            progress(i + 1, len(rows))
    groups = list(acc.values())
    traj = [float(all(g)) for g in groups]
    n = sum(len(g) for g in groups)
    return {
        "states": n,
        "task_instances": len(groups),
        "accuracy": sum(map(sum, groups)) / n,
        "accuracy_ci95": cluster_ci(groups),
        "mrr": sum(map(sum, mrr.values())) / n,
        "mrr_ci95": cluster_ci(list(mrr.values())),
        "trajectory_accuracy": float(np.mean(traj)),
        "trajectory_accuracy_ci95": cluster_ci([[t] for t in traj]),
        "accuracy_per_env": {env: float(np.mean(v)) for env, v in sorted(by_env.items())},
        "accuracy_final_step": float(np.mean(by_stage["final"])) if by_stage["final"] else None,
        "accuracy_earlier_steps": (
            float(np.mean(by_stage["earlier"])) if by_stage["earlier"] else None
        ),
        "seconds": round(time.perf_counter() - t0, 1),
        "per_state": states,
    }


# --- best-of-n with the PRM as verifier ------------------------------------------------------
@dataclass
class BestOfNConfig:
    """``arena prm best-of-n`` settings."""

    n: list[int] = field(default_factory=lambda: [1, 2, 4, 8])
    """Candidates sampled per step (1: the student alone, no verifier)."""
    episodes: int = 20
    """Page seeds per task (held out: from ``policies.lm.evaluation.EVAL_SEED0``)."""
    temperature: float = 1.0
    """The student's sampling temperature."""
    max_steps: int = 10
    """The episode's step limit (the web envs' default)."""
    checklist: str = "written"
    """``written``: the PRM writes each task's checklist from its first page (as Web-Shepherd
    does at test time); ``twin``: the twin's expert checklist (an oracle's)."""
    seed: int = 0

    def problems(self) -> list[str]:
        bad = []
        if not self.n or any(k < 1 for k in self.n):
            bad.append(f"n={self.n} (candidate counts of at least 1)")
        if self.episodes < 1 or self.max_steps < 1:
            bad.append(f"episodes={self.episodes}, max_steps={self.max_steps} (at least 1)")
        if not self.temperature > 0:
            bad.append(f"temperature={self.temperature} (positive: n samples must differ)")
        if self.checklist not in ("written", "twin"):
            bad.append(f"checklist={self.checklist!r} (written or twin)")
        return bad


def load_student_run(run: str | Path, checkpoint: str | None = None):
    """The student of a ``bc``/``grpo`` run's newest checkpoint (or ``checkpoint``,
    ``iter_N``) and its training tasks."""
    from policies.inference import WEIGHTS_DIR, weights_file
    from policies.lm.algorithm import training_tasks
    from policies.lm.evaluation import load_student
    from policies.lm.module import MODULE_ID
    from training.checkpoints import latest_checkpoint, load_config
    from training.evaluation import module_specs

    run = Path(run)
    cfg = load_config(run)
    if cfg.algo not in ("bc", "grpo"):
        raise PRMError(f"{run}: a {cfg.algo} run; best-of-n samples a bc or grpo run's student")
    spec = module_specs(run).rl_module_specs[MODULE_ID]
    at = run / "checkpoints" / checkpoint if checkpoint else latest_checkpoint(run)
    if not at.is_dir():
        raise PRMError(f"{run}: no checkpoint {checkpoint}")
    return load_student(spec, at / WEIGHTS_DIR / weights_file(MODULE_ID)), training_tasks(
        cfg.env, cfg.settings
    )


def best_of_n_episode(prm, student, env, task: str, seed: int, n: int, cfg, generator) -> dict:
    """One episode: at each step the student samples ``n`` actions and the PRM's best is
    played (the first sampled on a tie; with ``n`` 1 the sample, unjudged)."""
    env_id = env_id_for(task, "twin")
    obs, _ = env.reset(seed=seed, options={"task_seed": seed})
    obs = obs["agent_0"]
    checklist = "" if n == 1 else task_checklist(prm, env_id, seed, obs, cfg.checklist)
    actions, thoughts, student_tokens = [], [], 0
    while True:
        prompt = student.prompt(obs, actions)
        samples = student.generate([prompt] * n, cfg.temperature, generator)
        student_tokens += n * len(prompt) + sum(len(c.tokens) for c in samples)
        texts = list(dict.fromkeys(c.text for c in samples))  # the distinct actions, in order
        page = getattr(env, "index", 0)
        responses = [step_response(obs, a, page) for a in texts]
        pick = 0
        if len(texts) > 1:
            row = step_state(env_id, obs, page, checklist, thoughts, actions)
            pick = int(np.argmax(prm.scores(row, responses)))
        actions.append(texts[pick])
        thoughts.append(responses[pick]["thought"])
        out, rew, term, trunc, _ = env.step({"agent_0": texts[pick]})
        if term["agent_0"] or trunc["agent_0"]:
            reward = float(rew["agent_0"])
            return {
                "task": task,
                "seed": seed,
                "n": n,
                "success": reward > 0.5,
                "steps": len(actions),
                "student_tokens": student_tokens,
            }
        obs = out["agent_0"]


def best_of_n(prm, student, tasks: list[str], cfg: BestOfNConfig, progress=None) -> dict:
    """Success against ``n`` on held-out seeds of ``tasks``, with each ``n``'s FLOPs: the
    student's sampling (2N per token read or written) and the PRM's reading (2N per token of
    its prompts, shared prefixes once, and of the checklists it writes)."""
    import torch

    import envs
    from policies.lm.evaluation import EVAL_SEED0
    from policies.lm.student import forward_flops
    from policies.testing import wilson

    if bad := cfg.problems():
        raise PRMError("bad best-of-n settings: " + "; ".join(bad))
    generator = torch.Generator().manual_seed(cfg.seed)
    seeds = range(EVAL_SEED0, EVAL_SEED0 + cfg.episodes)
    rows, done, total = [], 0, len(cfg.n) * len(tasks) * cfg.episodes
    for n in cfg.n:
        episodes = []
        prm_before = prm.tokens_read
        for task in tasks:
            env = envs.make(env_id_for(task, "twin"), max_steps=cfg.max_steps)
            for seed in seeds:
                episodes.append(best_of_n_episode(prm, student, env, task, seed, n, cfg, generator))
                done += 1
                if progress:
                    progress(done, total)
            env.close()
        wins = sum(e["success"] for e in episodes)
        student_flops = forward_flops(student.params, sum(e["student_tokens"] for e in episodes))
        prm_flops = forward_flops(prm.student.params, prm.tokens_read - prm_before)
        rows.append(
            {
                "n": n,
                "episodes": len(episodes),
                "success": wins / len(episodes),
                "success_ci95": list(wilson(wins, len(episodes))),
                "per_task": {
                    t: float(np.mean([e["success"] for e in episodes if e["task"] == t]))
                    for t in tasks
                },
                "steps_mean": float(np.mean([e["steps"] for e in episodes])),
                "student_flops_per_episode": student_flops / len(episodes),
                "prm_flops_per_episode": prm_flops / len(episodes),
            }
        )
    return {"tasks": tasks, "config": asdict(cfg), "rows": rows}


def plot_best_of_n(rows: list[dict], path: str | Path, title: str = "") -> None:
    """Success (with its 95% interval) against total FLOPs per episode, one point per n."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = sorted(rows, key=lambda r: r["n"])
    flops = [r["student_flops_per_episode"] + r["prm_flops_per_episode"] for r in rows]
    success = [r["success"] for r in rows]
    lo = [r["success"] - r["success_ci95"][0] for r in rows]
    hi = [r["success_ci95"][1] - r["success"] for r in rows]
    fig, ax = plt.subplots(figsize=(5, 3.5))
    ax.errorbar(flops, success, yerr=[lo, hi], marker="o", capsize=3)
    for f, s, r in zip(flops, success, rows, strict=True):
        ax.annotate(f"n={r['n']}", (f, s), textcoords="offset points", xytext=(6, -12))
    ax.set_xscale("log")
    ax.set_xlabel("FLOPs per episode (student sampling + PRM)")
    ax.set_ylabel("success (95% interval)")
    ax.set_ylim(0, 1)
    ax.set_title(title or "best-of-n with the PRM as verifier", fontsize=10)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    with replacing(path) as tmp:
        fig.savefig(tmp, format="png", dpi=120)
    plt.close(fig)
