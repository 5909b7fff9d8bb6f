"""The RLlib callback that runs the league of :mod:`policies.selfplay` after every training
iteration: it reads the training win rate, freezes ``near`` into the population when it has
converged, and gives the frozen ``far`` module the weights of the next opponent."""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
from ray.rllib.callbacks.callbacks import RLlibCallback

from policies.selfplay.league import Population, meta_strategy, payoff_value, play, should_freeze


def module_policy(algorithm, weights: dict):
    """A :class:`policies.inference.ModulePolicy` of ``near``'s architecture with ``weights``."""
    from policies.inference import ModulePolicy

    module = algorithm.config.rl_module_spec.rl_module_specs["near"].build()
    module.load_state_dict(weights)
    return ModulePolicy(module)


def near_weights(algorithm) -> dict:
    return {
        k: v.detach().cpu().clone() for k, v in algorithm.get_module("near").state_dict().items()
    }


def training_win_rate(result: dict) -> float | None:
    """wins / (wins + losses) over the iteration's recent episodes (draws ignored), from the
    sampler's ``win_rate`` (near won) and ``episode_result`` (+1 / 0 / -1)."""
    er = result.get("env_runners", {})
    won, mean = er.get("win_rate"), er.get("episode_result")
    if won is None or mean is None or not np.isfinite([won, mean]).all():
        return None
    lost = won - mean
    return float(won / (won + lost)) if won + lost > 1e-9 else None


class SelfPlayCallback(RLlibCallback):
    """See :mod:`policies.selfplay`. The population lives in ``<run>/population`` (the run sets
    ``algorithm.arena_run_dir``) or, outside a run, in a temporary directory. ``settings``
    (a :class:`policies.selfplay.SelfPlaySettings`) is set by :func:`with_settings`."""

    settings = None

    @classmethod
    def with_settings(cls, settings) -> type:
        """This callback class bound to ``settings`` (RLlib builds callbacks without
        arguments)."""
        return type(cls.__name__, (cls,), {"settings": settings})

    def on_train_result(self, *, algorithm, result: dict, **kwargs) -> None:
        settings = self.settings
        league = getattr(algorithm, "_arena_league", None)
        if league is None:
            root = getattr(algorithm, "arena_run_dir", None)
            root = Path(root) / "population" if root else Path(tempfile.mkdtemp(prefix="league-"))
            league = algorithm._arena_league = Population(root)
            if league.size == 0:  # the population starts with the initial policy
                league.add(near_weights(algorithm), np.zeros(0))
                league.state = {"win_rates": [], "iterations": 0, "opponent": 0}
                league.save()
        st = league.state
        wr = training_win_rate(result)
        st["iterations"] += 1
        if wr is not None:
            st["win_rates"] = (st["win_rates"] + [wr])[-settings.win_window :]
        full = league.size >= settings.population_cap
        if not full and should_freeze(
            st["win_rates"],
            st["iterations"],
            settings.win_window,
            settings.freeze_win_rate,
            settings.freeze_std,
            settings.min_iterations,
            settings.max_iterations,
        ):
            self._freeze(algorithm, league, settings)
        meta = meta_strategy(settings.meta_solver, league.payoff)
        rng = np.random.default_rng(int(result.get("training_iteration", 0)) + 7919 * league.size)
        st["opponent"] = int(rng.choice(league.size, p=meta))
        st["meta"] = meta.tolist()
        league.save()
        from policies.ppo import set_module_weights

        set_module_weights(algorithm, {"far": league.weights(st["opponent"])})
        result.setdefault("arena", {}).update(
            population=league.size,
            opponent=st["opponent"],
            train_win_rate=np.nan if wr is None else wr,
        )

    @staticmethod
    def _freeze(algorithm, league: Population, settings) -> None:
        weights = near_weights(algorithm)
        me = module_policy(algorithm, weights)
        cfg = algorithm.config
        row = []
        for k in range(league.size):
            games = play(
                cfg.env,
                me,
                module_policy(algorithm, league.weights(k)),
                settings.payoff_games,
                num_envs=min(64, settings.payoff_games),
                seed=league.size * 1000 + k,
                env_config=dict(cfg.env_config),
            )
            row.append(payoff_value(games["wins"], games["losses"]))
        league.add(weights, np.asarray(row))
        league.state.update(win_rates=[], iterations=0)
