"""Starting PPO from demonstrations: before the first iteration of a new run (not a resumed
one), every trained module whose observations match the demos file clones it, the actor by
regression of its Gaussian mean on the demonstrated actions (cross-entropy for discrete
actions) and, where the critic reads the agent's own observation (IPPO), the critic on the
demonstrations' discounted returns, so that PPO's first advantages do not wreck the clone.
The demos file holds ``obs [N, D]``, ``act [N, A]``, ``reward [N]``, ``episode [N]`` (each
episode's steps in order), as ``arena volleyball demos`` writes it.
"""

from __future__ import annotations

import numpy as np


def discounted_returns(reward: np.ndarray, episode: np.ndarray, gamma: float) -> np.ndarray:
    """Return-to-go of every step within its episode (each episode's steps in order)."""
    out = np.zeros(len(reward), np.float64)
    running = 0.0
    for i in range(len(reward) - 1, -1, -1):
        if i == len(reward) - 1 or episode[i + 1] != episode[i]:
            running = 0.0
        running = reward[i] + gamma * running
        out[i] = running
    return out.astype(np.float32)


def clone(module, obs, act, returns, *, epochs: int, log_std: float, seed: int = 0) -> dict:
    """Fits ``module`` (an :class:`policies.modules.ActorCritic`) to demonstrations in place:
    Adam at 1e-3, minibatches of 256, ``epochs`` passes. Returns the final losses."""
    import torch

    torch.manual_seed(seed)
    spec = module.spec
    batch = spec.pack(obs, None, None, np.zeros(len(obs), int))
    tensors = {k: torch.as_tensor(v) for k, v in batch.items()}
    target = torch.as_tensor(act)
    value_target = torch.as_tensor(returns)
    own_critic = not spec.state_dim
    opt = torch.optim.Adam(module.parameters(), lr=1e-3)
    n, size = len(obs), min(256, len(obs))
    gen = torch.Generator().manual_seed(seed)
    losses = {}
    for _ in range(epochs):
        for idx in torch.randperm(n, generator=gen).split(size):
            rows = {"obs": {k: v[idx] for k, v in tensors.items()}}
            out, _ = module.actor(rows)
            if module.log_std is not None:
                actor = torch.nn.functional.mse_loss(out[:, : module.n_out], target[idx])
            else:
                actor = torch.nn.functional.cross_entropy(out, target[idx].long().reshape(-1))
            loss = actor
            if own_critic:
                critic = torch.nn.functional.mse_loss(module.critic(rows)[0], value_target[idx])
                loss = loss + 0.01 * critic
                losses["critic"] = critic.item()
            opt.zero_grad()
            loss.backward()
            opt.step()
            losses["actor"] = actor.item()
    if module.log_std is not None:
        with torch.no_grad():
            module.log_std.fill_(log_std)
    return losses


def warm_start(algo, settings) -> str | None:
    """Clones ``settings.demos`` into the algorithm's trained modules (Learners and
    EnvRunners); returns a line saying what it did, or None without demos."""
    if not settings.demos:
        return None
    import torch

    from envs.demos import load_demos
    from policies.algorithm import AlgorithmMismatch
    from policies.ppo import set_module_weights

    try:
        data = load_demos(settings.demos)
    except ValueError as e:
        raise AlgorithmMismatch(f"demos: {e}") from None
    specs = algo.config.rl_module_spec.rl_module_specs
    trained = algo.config.policies_to_train or list(specs)
    weights = algo.learner_group.get_weights(module_ids=list(trained))
    returns = discounted_returns(data["reward"], data["episode"], settings.gamma)
    started, losses = {}, {}
    for mid in trained:
        module = specs[mid].build()
        if tuple(module.spec.obs_shape) != data["obs"].shape[1:]:
            continue
        module.load_state_dict({k: torch.as_tensor(v) for k, v in weights[mid].items()})
        losses[mid] = clone(
            module,
            data["obs"],
            data["act"],
            returns,
            epochs=settings.demo_epochs,
            log_std=settings.demo_log_std,
        )
        started[mid] = {k: v.detach().numpy() for k, v in module.state_dict().items()}
    if not started:
        shapes = {m: tuple(specs[m].build().spec.obs_shape) for m in trained}
        raise AlgorithmMismatch(
            f"demos {settings.demos}: observations of shape {data['obs'].shape[1:]} fit no "
            f"trained module (their observations: {shapes})"
        )
    set_module_weights(algo, started)
    episodes = int(data["episode"].max()) + 1 if len(data["episode"]) else 0
    said = ", ".join(f"{m} (actor loss {v['actor']:.4f})" for m, v in losses.items())
    return f"cloned {len(data['obs'])} steps of {episodes} demonstrated episodes into {said}"
