"""Offline multi-task MARL on datasets recorded by ``arena record`` (docs/offline.md):
``arena offline DATASET ... --algo bc --out DIR [--eval MAPS]``.

One network (``policies.offline.entity_bc``) learns from several tasks' datasets at once and
acts zero-shot on tasks it never saw, through the envs' entity tokens (``envs.entities``).
The loop is ODIS's (github.com/LAMDA-RL/ODIS ``src/mto.py`` ``train_sequential``): each round
visits the source tasks in a shuffled order and takes one gradient step per task on a batch of
its episodes (``batch_size: 32``, Adam ``lr: 0.0005``, ``grad_norm_clip: 10``,
``src/config/default.yaml``); its budget ``t_max: 35000`` counts these steps
(``src/config/envs/sc2_offline.yaml``). The loss is ``bc_learner.py``'s cross-entropy of the
dataset's actions, over the steps an episode filled (ODIS divides a sum that also counts the
padding by the filled steps; here the padding is left out).

A plain torch loop, not RLlib's offline API: RLlib 2.60's offline stack (``OfflineData``,
``OfflinePreLearner``) reads single-agent episodes, and this learner needs whole multi-agent
episodes of several tasks with different unit counts. The datasets are read with Ray Data
(``training.record.load_episodes``).

Resumable: ``DIR/checkpoint.pt`` (weights and optimiser, written to a temporary name and
renamed, loaded with ``weights_only``) and ``DIR/progress.json`` every ``checkpoint_every``
steps; the same command again continues from there.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np

from envs.files import replacing, write_atomic
from training.config import ConfigError

ALGOS = ("bc",)


class OfflineError(ConfigError):
    """Bad input to ``arena offline``: one line names what is wrong and what is allowed."""


@dataclass(frozen=True)
class OfflineConfig:
    """``arena offline``'s settings (ODIS's where it has one)."""

    algo: str = "bc"
    steps: int = 35_000  # gradient steps (sc2_offline.yaml t_max)
    batch_episodes: int = 32  # default.yaml batch_size
    lr: float = 5e-4
    grad_clip: float = 10.0
    embed_dim: int = 64
    seed: int = 0
    checkpoint_every: int = 500

    def check(self) -> None:
        if self.algo not in ALGOS:
            raise OfflineError(f"--algo {self.algo!r}: offline algorithms are {', '.join(ALGOS)}")
        for name in ("steps", "batch_episodes", "checkpoint_every", "embed_dim"):
            if getattr(self, name) < 1:
                raise OfflineError(f"--{name.replace('_', '-')} must be at least 1")
        if not self.lr > 0:
            raise OfflineError(f"--lr must be positive, got {self.lr}")


@dataclass
class Task:
    """One source task's episodes as padded arrays ``[episodes, T, agents, ...]``."""

    name: str
    env: str
    env_args: dict
    tokens: dict  # kind -> torch tensor
    actions: object  # torch long [Ne, T, A]
    filled: object  # torch bool [Ne, T]
    n_no_attack: int


def task_shape(env: str, env_args: dict, n_actions: int):
    """An env's entity layout and its number of actions that name no enemy."""
    from envs.entities import entity_layout

    lay = entity_layout(env, env_args)
    n_enemy = lay.count("enemy") if "enemy" in lay.groups else 0
    return lay, n_actions - n_enemy


def load_task(path: str | Path) -> Task:
    import torch

    from training.record import load_episodes

    episodes, card = load_episodes(path)
    n_actions = episodes[0]["action_mask"].shape[-1]
    lay, n_no_attack = task_shape(card["env"], card["env_args"], n_actions)
    T = max(len(e["t"]) for e in episodes)
    A = episodes[0]["obs"].shape[1]
    obs = np.zeros((len(episodes), T, A, lay.dim), np.float32)
    actions = np.zeros((len(episodes), T, A), np.int64)
    filled = np.zeros((len(episodes), T), bool)
    for i, e in enumerate(episodes):
        n = len(e["t"])
        obs[i, :n] = e["obs"][..., : lay.dim]
        actions[i, :n] = e["action"]
        filled[i, :n] = True
    tokens = {k: torch.from_numpy(v) for k, v in lay.split(obs).items()}
    return Task(
        Path(path).name,
        card["env"],
        dict(card["env_args"]),
        tokens,
        torch.from_numpy(actions),
        torch.from_numpy(filled),
        n_no_attack,
    )


def model_config(tasks: list[Task], cfg: OfflineConfig):
    """The network's shape; the tasks' token widths must agree."""
    from policies.offline.entity_bc import EntityBCConfig

    shapes = {}
    for t in tasks:
        widths = {k: int(v.shape[-1]) for k, v in t.tokens.items() if k != "own"}
        shapes[t.name] = (int(t.tokens["own"].shape[-1]), widths, t.n_no_attack)
    if len({json.dumps(s, sort_keys=True) for s in shapes.values()}) > 1:
        raise OfflineError(
            "the datasets' entity tokens differ, so one network cannot read them all: "
            + "; ".join(
                f"{k}: own {s[0]}, {s[1]}, {s[2]} no-attack actions" for k, s in shapes.items()
            )
        )
    own, widths, n = next(iter(shapes.values()))
    return EntityBCConfig(own, widths, n, embed_dim=cfg.embed_dim)


def sequence_logits(model, tokens: dict, actions, hidden=None):
    """Logits ``[B, T, A, n]`` of episodes, step by step with the recurrent history token;
    the last action at step t is the dataset's action at t - 1."""
    import torch

    B, T, A = actions.shape
    hidden = model.initial_state(B * A) if hidden is None else hidden
    last = torch.full((B, A), -1, dtype=torch.long)
    out = []
    for t in range(T):
        step = {k: v[:, t] for k, v in tokens.items()}
        logits, hidden = model(step, last, hidden)
        out.append(logits)
        last = actions[:, t]
    return torch.stack(out, 1)


def bc_loss(model, task: Task, idx) -> object:
    import torch

    filled = task.filled[idx]
    T = int(filled.any(0).nonzero().max()) + 1
    tokens = {k: v[idx, :T] for k, v in task.tokens.items()}
    actions = task.actions[idx, :T]
    logits = sequence_logits(model, tokens, actions)
    ce = torch.nn.functional.cross_entropy(
        logits.reshape(-1, logits.shape[-1]), actions.reshape(-1), reduction="none"
    ).view(actions.shape)
    w = filled[:, :T, None].float().expand_as(ce)
    return (ce * w).sum() / w.sum()


def train(
    datasets: list[str],
    out: str | Path,
    cfg: OfflineConfig,
    address: str | None = None,
    progress=None,
) -> dict:
    """Trains on ``datasets`` into ``out`` (resuming what is there); returns the summary."""
    import torch

    from policies.offline.entity_bc import EntityBC
    from training import runtime

    cfg.check()
    if not datasets:
        raise OfflineError("arena offline needs at least one DATASET (arena record writes them)")
    out = Path(out)
    # What a run is: more --steps (or another --checkpoint-every) continue it.
    same = {k: v for k, v in asdict(cfg).items() if k not in ("steps", "checkpoint_every")}
    spec = {"config": same, "datasets": [str(Path(d).resolve()) for d in datasets]}
    saved = out / "offline.json"
    if saved.is_file():
        before = json.loads(saved.read_text())
        if {k: before.get(k) for k in spec} != spec:
            raise OfflineError(
                f"{out} holds another offline run ({before.get('datasets')}); use a new --out"
            )
    elif out.exists() and any(out.iterdir()):
        raise OfflineError(f"{out} holds files but no offline run; use a new --out")
    runtime.connect(address)
    torch.set_num_threads(1)
    tasks = [load_task(d) for d in datasets]
    mcfg = model_config(tasks, cfg)
    torch.manual_seed(cfg.seed)
    model = EntityBC(mcfg)
    optim = torch.optim.Adam(model.parameters(), lr=cfg.lr)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(
        saved,
        json.dumps(spec | {"model": mcfg.to_json(), "tasks": [t.env for t in tasks]}, indent=2),
    )
    ckpt, prog_path = out / "checkpoint.pt", out / "progress.json"
    state = {"step": 0, "losses": [], "seconds": 0.0}
    if ckpt.is_file() and prog_path.is_file():
        blob = torch.load(ckpt, weights_only=True)
        model.load_state_dict(blob["model"])
        optim.load_state_dict(blob["optim"])
        state = json.loads(prog_path.read_text())

    def save():
        blob = {"model": model.state_dict(), "optim": optim.state_dict()}
        with replacing(ckpt) as tmp:
            torch.save(blob, tmp)
        write_atomic(prog_path, json.dumps(state))

    window: list[float] = []
    t0 = time.perf_counter() - state["seconds"]
    while state["step"] < cfg.steps:
        # Every draw is a function of (seed, step), so a resumed run repeats the same steps.
        rnd, k = divmod(state["step"], len(tasks))
        task = tasks[np.random.default_rng([cfg.seed, rnd]).permutation(len(tasks))[k]]
        draw = np.random.default_rng([cfg.seed, state["step"], 1])
        idx = torch.from_numpy(draw.integers(0, task.actions.shape[0], cfg.batch_episodes))
        loss = bc_loss(model, task, idx)
        optim.zero_grad()
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), cfg.grad_clip)
        optim.step()
        state["step"] += 1
        window.append(loss.item())
        if state["step"] % cfg.checkpoint_every == 0 or state["step"] == cfg.steps:
            state["losses"].append([state["step"], float(np.mean(window))])
            state["seconds"] = time.perf_counter() - t0
            window = []
            save()
            if progress:
                progress(state["step"], cfg.steps, state["losses"][-1][1])
    return {
        "out": str(out),
        "steps": state["step"],
        "loss": state["losses"][-1][1],
        "seconds": round(state["seconds"], 1),
        "tasks": [t.env for t in tasks],
    }


def load_model(out: str | Path):
    """The trained network of an ``arena offline`` run (weights only, nothing unpickled)."""
    import torch

    from policies.offline.entity_bc import EntityBC, EntityBCConfig

    out = Path(out)
    if not (out / "offline.json").is_file() or not (out / "checkpoint.pt").is_file():
        raise OfflineError(f"{out} is not an arena offline run (no offline.json/checkpoint.pt)")
    meta = json.loads((out / "offline.json").read_text())
    model = EntityBC(EntityBCConfig(**meta["model"]))
    model.load_state_dict(torch.load(out / "checkpoint.pt", weights_only=True)["model"])
    model.eval()
    return model, meta


def evaluate(model, env: str, episodes: int, seed: int = 1_000_000, env_args=None) -> dict:
    """Plays ``episodes`` episodes of ``env`` at once (its vectorised core), every agent acting
    greedily on legal actions (ODIS's ``test_mode``); the first episode of each copy counts.
    Returns the win rate with its Wilson 95% interval (battles) and the mean return."""
    import torch

    import envs
    from policies.offline.entity_bc import masked_greedy
    from policies.testing import wilson

    env_args = dict(env_args or {})
    vec = envs.make_vector(env, episodes, seed=seed, **env_args)
    if len(vec.groups) != 1:
        raise OfflineError(
            f"{env} has agent groups {list(vec.groups)}; offline learners act for one"
        )
    group, info = next(iter(vec.groups.items()))
    lay, n_no_attack = task_shape(env, env_args, info.action_space.n)
    if (
        n_no_attack != model.cfg.n_no_attack
        or lay.own_width != model.cfg.own_width
        or {k: lay.width(k) for k in lay.groups} != model.cfg.widths
    ):
        raise OfflineError(f"{env}'s entity tokens differ from the ones the network was trained on")
    step = vec.reset(seed=seed)
    A = step.obs[group].shape[1]
    legal = np.ones((episodes, A, info.action_space.n), np.float32)
    hidden = model.initial_state(episodes * A)
    last = torch.full((episodes, A), -1, dtype=torch.long)
    done = np.zeros(episodes, bool)
    won = np.zeros(episodes, bool)
    ret = np.zeros(episodes)
    with torch.no_grad():
        while not done.all():
            tokens = {
                k: torch.from_numpy(np.ascontiguousarray(v, np.float32))
                for k, v in lay.split(np.asarray(step.obs[group])).items()
            }
            logits, hidden = model(tokens, last, hidden)
            act = masked_greedy(logits, (step.action_mask or {}).get(group, legal))
            step = vec.step({group: act})
            last = torch.from_numpy(act)
            ret += np.where(done, 0.0, step.rewards.sum(1))
            end = (step.terminated | step.truncated) & ~done
            if step.info is not None and "battle_won" in step.info:
                won[end] = np.asarray(step.info["battle_won"])[end]
            done |= end
    wins = int(won.sum())
    lo, hi = wilson(wins, episodes)
    return {
        "env": env,
        "episodes": episodes,
        "win_rate": wins / episodes,
        "win_ci95": [lo, hi],
        "return_mean": float(ret.mean()),
    }


def zero_shot(out: str | Path, env_ids: list[str], episodes: int) -> list[dict]:
    """Plays each env with the run's network; adds the rows to ``out/zero_shot.json`` (an env
    played again replaces its row) and returns them."""
    import envs

    for env in env_ids:
        envs.spec(env)  # an unknown id fails before any play
    model, meta = load_model(out)
    rows = []
    for env in env_ids:
        row = evaluate(model, env, episodes)
        row["source"] = env in meta["tasks"]
        rows.append(row)
    path = Path(out) / "zero_shot.json"
    table = json.loads(path.read_text()) if path.is_file() else {}
    table.update({r["env"]: r for r in rows})
    write_atomic(path, json.dumps(table, indent=2))
    return rows
