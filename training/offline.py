"""Offline multi-task MARL on datasets recorded by ``arena record`` (docs/offline.md):
``arena offline DATASET ... --algo bc|odis|bikt --out DIR [--eval MAPS]``.

One network (``policies.offline.entity_bc``; ODIS: ``policies.offline.odis`` with its losses in
``training.odis``; BiKT: ``policies.offline.bikt``, ``training.bikt``) learns from several
tasks' datasets at once and acts zero-shot on tasks it never saw, through the envs' entity
tokens (``envs.entities``). The loop is ODIS's
(github.com/LAMDA-RL/ODIS ``src/mto.py`` ``train_sequential``): each round visits the source
tasks in a shuffled order, a batch of each task's episodes; BC and BiKT step once per task,
ODIS once per round on the summed gradients (``learner.update``); 32 episodes a batch, Adam at
``lr: 0.0005``, ``grad_norm_clip: 10`` (``src/config/default.yaml``); its budget
``t_max: 35000`` counts these task batches (``src/config/envs/sc2_offline.yaml``). BC's loss
is ``bc_learner.py``'s cross-entropy of the dataset's actions, over the steps an episode
filled (ODIS divides a sum that also counts the padding by the filled steps; here the padding
is left out).

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

from envs.files import write_atomic
from training.checkpoints import claim_loop_dir, load_loop, save_loop
from training.config import ConfigError

ALGOS = ("bc", "odis", "bikt")


class OfflineError(ConfigError):
    """Bad input to ``arena offline``: one line names what is wrong and what is allowed."""


@dataclass(frozen=True)
class OfflineConfig:
    """``arena offline``'s settings (ODIS's where it has one)."""

    algo: str = "bc"
    steps: int = 35_000  # task batches (sc2_offline.yaml t_max; ODIS's t_env)
    pretrain_steps: int = 15_000  # odis, bikt: skill (and tactic) task batches (odis.yaml)
    batch_episodes: int = 32  # default.yaml batch_size
    lr: float = 5e-4
    grad_clip: float = 10.0
    embed_dim: int = 64
    seed: int = 0
    checkpoint_every: int = 500

    def check(self) -> None:
        if self.algo not in ALGOS:
            raise OfflineError(f"--algo {self.algo!r}: offline algorithms are {', '.join(ALGOS)}")
        for name in ("steps", "pretrain_steps", "batch_episodes", "checkpoint_every", "embed_dim"):
            if getattr(self, name) < 1:
                raise OfflineError(f"--{name.replace('_', '-')} must be at least 1")
        if not self.lr > 0:
            raise OfflineError(f"--lr must be positive, got {self.lr}")


@dataclass
class Task:
    """One source task's episodes as padded arrays ``[episodes, T + 1, agents, ...]``: step
    ``length[i]`` of episode ``i`` holds its final observation and state (no action)."""

    name: str
    env: str
    env_args: dict
    tokens: dict  # kind -> torch tensor
    actions: object  # torch long [Ne, T+1, A]
    filled: object  # torch bool [Ne, T+1]: the agents acted at this step
    n_no_attack: int
    length: object  # torch long [Ne]
    reward: object  # torch float [Ne, T+1]: the team's (SMAC's shared) reward
    terminal: object  # torch bool [Ne, T+1]: the episode ended here (not by its time limit)
    state: dict | None  # kind -> torch tensor (envs.entities.state_layout), where there is one


def task_label(env: str, env_args: dict) -> str:
    """A task's name in a run's rows and metadata: the env id, then each argument as
    ``:KEY=VALUE`` (``mpe/simple_spread-v3:N=5``), the form ``--eval`` takes."""
    return env + "".join(f":{k}={json.dumps(v)}" for k, v in sorted(env_args.items()))


def parse_task(text: str, flag: str = "--eval") -> tuple[str, dict]:
    """``ENV[:KEY=VALUE...]`` (:func:`task_label`'s form), given as ``flag``, as the env id and
    its arguments, checked against the env's factory."""
    import envs
    from envs.registry import check_args
    from training.config import parse_overrides

    env, *pairs = text.strip().split(":")
    try:
        if not all(p.partition("=")[2].strip() for p in pairs):
            raise ConfigError("an argument without a value")
        env_args = dict(parse_overrides(pairs))  # --set's reader: values as YAML scalars
    except ConfigError:
        raise OfflineError(
            f"{flag} {text!r}: after the env id come arguments as :KEY=VALUE "
            "(e.g. mpe/simple_spread-v3:N=5)"
        ) from None
    check_args(envs.spec(env), env_args)
    return env, env_args


def task_shape(env: str, env_args: dict, n_actions: int):
    """An env's entity layout and its number of actions that name no enemy."""
    from envs.entities import entity_layout

    lay = entity_layout(env, env_args)
    n_enemy = lay.count("enemy") if "enemy" in lay.groups else 0
    return lay, n_actions - n_enemy


def load_task(path: str | Path) -> Task:
    import torch

    from envs.entities import state_layout
    from training.record import load_episodes

    episodes, card = load_episodes(path)
    n_actions = episodes[0]["action_mask"].shape[-1]
    lay, n_no_attack = task_shape(card["env"], card["env_args"], n_actions)
    slay = None
    if "state" in episodes[0]:
        try:
            slay = state_layout(card["env"], card["env_args"])
        except ValueError:  # a state with no unit blocks: fine for BC, refused by ODIS
            pass
    Ne, T = len(episodes), max(len(e["t"]) for e in episodes)
    A = episodes[0]["obs"].shape[1]
    obs = np.zeros((Ne, T + 1, A, lay.dim), np.float32)
    state = np.zeros((Ne, T + 1, slay.dim), np.float32) if slay else None
    actions = np.zeros((Ne, T + 1, A), np.int64)
    filled = np.zeros((Ne, T + 1), bool)
    reward = np.zeros((Ne, T + 1), np.float32)
    terminal = np.zeros((Ne, T + 1), bool)
    length = np.zeros(Ne, np.int64)
    for i, e in enumerate(episodes):
        n = length[i] = len(e["t"])
        obs[i, :n] = e["obs"][..., : lay.dim]
        obs[i, n] = e["next_obs"][-1][..., : lay.dim]
        if slay:
            state[i, :n] = e["state"]
            state[i, n] = e["next_state"][-1]
        actions[i, :n] = e["action"]
        filled[i, :n] = True
        reward[i, :n] = e["reward"].mean(-1)  # SMAC gives every agent the team's reward
        terminal[i, n - 1] = bool(np.all(e["terminated"][-1]))
    tokens = {k: torch.from_numpy(v) for k, v in lay.split(obs).items()}
    return Task(
        Path(path).name,
        card["env"],
        dict(card["env_args"]),
        tokens,
        torch.from_numpy(actions),
        torch.from_numpy(filled),
        n_no_attack,
        torch.from_numpy(length),
        torch.from_numpy(reward),
        torch.from_numpy(terminal),
        {k: torch.from_numpy(v) for k, v in slay.split(state).items() if k != "own"}
        if slay
        else None,
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
    agent = EntityBCConfig(own, widths, n, embed_dim=cfg.embed_dim)
    if cfg.algo == "bc":
        return agent
    if cfg.algo == "bikt":
        from policies.offline.bikt import BiKTConfig

        # Decision Transformer's target: the best return in the data
        return BiKTConfig(agent, target_return=max(float(t.reward.sum(1).max()) for t in tasks))
    from policies.offline.odis import ODISConfig

    units = {}
    for t in tasks:
        if t.state is None:
            raise OfflineError(
                f"--algo odis needs a global state split into units (smac/*, smacv2/*, "
                f"gridmpe/cn-v0); {t.name} ({t.env}) has none"
            )
        units[t.name] = (
            int(t.state["ally"].shape[-1]),
            int(t.state["enemy"].shape[-1]),
            "last_action" in t.state,
        )
    if len(set(units.values())) > 1:
        raise OfflineError(f"the datasets' state units differ: {units}")
    ally, enemy, last = next(iter(units.values()))
    return ODISConfig(agent, ally, enemy, state_last_action=last)


def build(mcfg):
    """The trainable module of a model config: BC's network, or ODIS's or BiKT's learner."""
    from policies.offline.bikt import BiKTConfig
    from policies.offline.entity_bc import EntityBC, EntityBCConfig
    from training.bikt import BiKTLearner
    from training.odis import ODISLearner

    if isinstance(mcfg, EntityBCConfig):
        return EntityBC(mcfg)
    return BiKTLearner(mcfg) if isinstance(mcfg, BiKTConfig) else ODISLearner(mcfg)


@dataclass(frozen=True)
class Phase:
    """A stretch of task batches with one loss and one optimiser."""

    name: str
    start: int
    stop: int
    per_round: bool  # one optimiser step per round of tasks (ODIS) or per task batch (BC)


def phases(cfg: OfflineConfig, n_tasks: int) -> list[Phase]:
    if cfg.algo == "bc":
        return [Phase("bc", 0, cfg.steps, False)]
    if cfg.algo == "bikt":  # skills and tactics, then the decision transformer on them
        pre = cfg.pretrain_steps
        return [Phase("pretrain", 0, pre, False), Phase("policy", pre, pre + cfg.steps, False)]
    # ODIS's train_sequential runs whole rounds: every task once, then one update.
    pre = -(-cfg.pretrain_steps // n_tasks) * n_tasks
    return [
        Phase("pretrain", 0, pre, True),
        Phase("policy", pre, pre + -(-cfg.steps // n_tasks) * n_tasks, True),
    ]


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

    from training import runtime

    cfg.check()
    if not datasets:
        raise OfflineError("arena offline needs at least one DATASET (arena record writes them)")
    out = Path(out)
    # What a run is: more --steps (or another --checkpoint-every) continue it.
    ignored = ("steps", "checkpoint_every") + ("pretrain_steps",) * (cfg.algo == "bc")
    same = {k: v for k, v in asdict(cfg).items() if k not in ignored}
    spec = {"config": same, "datasets": [str(Path(d).resolve()) for d in datasets]}
    claim_loop_dir(out, "offline.json", spec, "offline", OfflineError)
    runtime.connect(address)
    torch.set_num_threads(1)
    tasks = [load_task(d) for d in datasets]
    mcfg = model_config(tasks, cfg)
    torch.manual_seed(cfg.seed)
    module = build(mcfg)
    out.mkdir(parents=True, exist_ok=True)
    write_atomic(
        out / "offline.json",
        json.dumps(
            spec
            | {
                "algo": cfg.algo,
                "model": mcfg.to_json(),
                "tasks": [task_label(t.env, t.env_args) for t in tasks],
            },
            indent=2,
        ),
    )
    plan = phases(cfg, len(tasks))
    total = plan[-1].stop

    def phase_at(step: int) -> Phase:
        return next(ph for ph in plan if step < ph.stop)

    def optimiser(ph: Phase):
        if cfg.algo == "bc":
            params = list(module.parameters())
        elif ph.name == "pretrain":
            params = module.pretrain_parameters()
        else:  # ODIS and BiKT freeze the skill parts while they learn to pick skills
            params = module.policy_parameters()
        return params, torch.optim.Adam(params, lr=cfg.lr)  # ODIS resets it per phase

    state = {"step": 0, "losses": [], "seconds": 0.0, "target_updated": 0}
    blob, saved_state = load_loop(out)
    if blob is not None:
        module.load_state_dict(blob["model"])
        state = {"target_updated": 0} | saved_state
    phase = phase_at(state["step"]) if state["step"] < total else plan[-1]
    params, optim = optimiser(phase)
    if blob is not None and blob.get("phase", phase.name) == phase.name:
        optim.load_state_dict(blob["optim"])

    def save():
        blob = {"model": module.state_dict(), "optim": optim.state_dict(), "phase": phase.name}
        save_loop(out, blob, state)

    loss_of = {
        "bc": lambda task, idx: bc_loss(module, task, idx),
        "pretrain": lambda task, idx: module.skill_loss(task, idx),
        "policy": lambda task, idx: module.policy_loss(task, idx),
    }
    window: list[float] = []
    t0 = time.perf_counter() - state["seconds"]
    while state["step"] < total:
        step = state["step"]
        if step > 0 and step == phase_at(step).start:  # a phase begins: ODIS resets Adam
            phase = phase_at(step)
            params, optim = optimiser(phase)
            if cfg.algo == "odis":  # and its targets start from the pretrained networks
                module.update_targets()
                state["target_updated"] = 0
        # Every draw is a function of (seed, step), so a resumed run repeats the same steps.
        rnd, k = divmod(step - phase.start, len(tasks))
        task = tasks[np.random.default_rng([cfg.seed, rnd]).permutation(len(tasks))[k]]
        draw = np.random.default_rng([cfg.seed, step, 1])
        idx = torch.from_numpy(draw.integers(0, task.actions.shape[0], cfg.batch_episodes))
        torch.manual_seed(int(draw.integers(2**31)))  # ODIS's Gumbel samples
        loss = loss_of[phase.name](task, idx)
        loss.backward()
        window.append(loss.item())
        if cfg.algo == "odis" and phase.name == "policy":  # target copies every 80 batches
            t = step - phase.start
            if t - state["target_updated"] >= module.loss.target_update:
                module.update_targets()
                state["target_updated"] = t
        state["step"] = step = step + 1
        if phase.per_round and k < len(tasks) - 1:
            continue  # ODIS sums the round's gradients, then steps once
        torch.nn.utils.clip_grad_norm_(params, cfg.grad_clip)
        optim.step()
        optim.zero_grad()
        group = len(tasks) if phase.per_round else 1  # task batches per optimiser step
        every = cfg.checkpoint_every
        if step == phase.stop or step // every > (step - group) // every:
            state["losses"].append([step, float(np.mean(window))])
            state["seconds"] = time.perf_counter() - t0
            window = []
            save()
            if progress:
                progress(step, total, state["losses"][-1][1])
    return {
        "out": str(out),
        "algo": cfg.algo,
        "steps": state["step"],
        "loss": state["losses"][-1][1],
        "seconds": round(state["seconds"], 1),
        "tasks": [task_label(t.env, t.env_args) for t in tasks],
    }


def load_model(out: str | Path):
    """The acting network of an ``arena offline`` run (weights only, nothing unpickled): BC's
    network, or ODIS's or BiKT's agent."""
    import torch

    from policies.offline.bikt import BiKTConfig
    from policies.offline.entity_bc import EntityBCConfig
    from policies.offline.odis import ODISConfig

    out = Path(out)
    if not (out / "offline.json").is_file() or not (out / "checkpoint.pt").is_file():
        raise OfflineError(f"{out} is not an arena offline run (no offline.json/checkpoint.pt)")
    meta = json.loads((out / "offline.json").read_text())
    algo = meta.get("algo", "bc")
    if algo == "bc":
        mcfg = EntityBCConfig(**meta["model"])
    else:
        mcfg = {"odis": ODISConfig, "bikt": BiKTConfig}[algo].from_json(meta["model"])
    module = build(mcfg)
    module.load_state_dict(torch.load(out / "checkpoint.pt", weights_only=True)["model"])
    model = module if algo == "bc" else module.agent
    model.eval()
    return model, meta


def evaluate(model, env: str, episodes: int, seed: int = 1_000_000, env_args=None) -> dict:
    """Plays ``episodes`` episodes of ``env`` at once (its vectorised core), every agent acting
    greedily on legal actions (ODIS's ``test_mode``); the first episode of each copy counts.
    Returns the win rate with its Wilson 95% interval (battles), the mean return (the sum
    over agents) with its 95% interval, and the mean episode length."""
    import torch

    import envs
    from policies.offline.entity_bc import masked_greedy
    from policies.testing import mean_ci95, wilson

    env_args = dict(env_args or {})
    vec = envs.make_vector(env, episodes, seed=seed, **env_args)
    if len(vec.groups) != 1:
        raise OfflineError(
            f"{env} has agent groups {list(vec.groups)}; offline learners act for one"
        )
    group, info = next(iter(vec.groups.items()))
    lay, n_no_attack = task_shape(env, env_args, info.action_space.n)
    agent = getattr(model.cfg, "agent", model.cfg)  # ODIS's and BiKT's configs hold it
    if (
        n_no_attack != agent.n_no_attack
        or lay.own_width != agent.own_width
        or {k: lay.width(k) for k in lay.groups} != agent.widths
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
    team = np.zeros(episodes)  # the team's return so far (SMAC: every agent's reward)
    length = np.zeros(episodes, np.int64)
    with torch.no_grad():
        while not done.all():
            tokens = {
                k: torch.from_numpy(np.ascontiguousarray(v, np.float32))
                for k, v in lay.split(np.asarray(step.obs[group])).items()
            }
            if getattr(model, "return_conditioned", False):  # BiKT: the return still to get
                to_go = torch.from_numpy(model.cfg.target_return - team)
                logits, hidden = model(tokens, last, hidden, to_go)
            else:
                logits, hidden = model(tokens, last, hidden)
            act = masked_greedy(logits, (step.action_mask or {}).get(group, legal))
            step = vec.step({group: act})
            last = torch.from_numpy(act)
            ret += np.where(done, 0.0, step.rewards.sum(1))
            length += ~done
            team += np.where(done, 0.0, step.rewards.mean(1))
            end = (step.terminated | step.truncated) & ~done
            if step.info is not None and "battle_won" in step.info:
                won[end] = np.asarray(step.info["battle_won"])[end]
            done |= end
    wins = int(won.sum())
    lo, hi = wilson(wins, episodes)
    return {
        "env": task_label(env, env_args),
        "env_args": env_args,
        "episodes": episodes,
        "win_rate": wins / episodes,
        "win_ci95": [lo, hi],
        "return_mean": float(ret.mean()),
        "return_ci95": list(mean_ci95(ret)),
        "length_mean": float(length.mean()),
    }


def zero_shot(out: str | Path, tasks: list[str], episodes: int) -> list[dict]:
    """Plays each task (``ENV[:KEY=VALUE...]``) with the run's network; adds the rows to
    ``out/zero_shot.json`` (a task played again replaces its row) and returns them."""
    plays = [parse_task(t) for t in tasks]  # a bad task fails before any play
    model, meta = load_model(out)
    rows = []
    for env, env_args in plays:
        row = evaluate(model, env, episodes, env_args=env_args)
        row["source"] = row["env"] in meta["tasks"]
        rows.append(row)
    path = Path(out) / "zero_shot.json"
    table = json.loads(path.read_text()) if path.is_file() else {}
    table.update({r["env"]: r for r in rows})
    write_atomic(path, json.dumps(table, indent=2))
    return rows
