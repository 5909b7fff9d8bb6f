"""Where a run's metrics go: every logger writes (W&B offline, MLflow's local file store), a
callback named on the command line runs, and bad names are one-line errors."""

import pytest
from rich.console import Console

import training
from training.config import ConfigError, TrainConfig, apply_overrides
from training.run import Callback

SMALL = ["train_batch_size=128", "minibatch_size=64", "num_epochs=1", "num_envs_per_env_runner=4"]


class Counting(Callback):
    """A user's callback: counts iterations into a file beside the run."""

    def on_iteration(self, run, row, learner, checkpoint) -> None:
        path = run.dir / "counted.txt"
        before = int(path.read_text()) if path.exists() else 0
        path.write_text(str(before + 1))


def test_a_run_writes_to_every_logger_and_runs_a_named_callback(ray_session, tmp_path, monkeypatch):
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    cfg = TrainConfig(env="mpe/simple_spread-v3", algo="ippo", iterations=2)
    apply_overrides(cfg, SMALL)
    cfg.loggers = ["csv", "tensorboard", "wandb", "mlflow"]
    cfg.callbacks = ["tests.training.test_loggers:Counting"]
    run = training.train(cfg, out=str(tmp_path), name="all", console=Console(quiet=True))
    assert (run / "metrics.csv").read_text().count("\n") == 3
    assert list((run / "tb").glob("events.out.tfevents.*"))
    assert (run / "counted.txt").read_text() == "2"
    # W&B: an offline run in the run directory, with both iterations' history
    (offline,) = (run / "wandb").glob("offline-run-*")
    assert list(offline.glob("*.wandb"))
    # MLflow: the file store in the run directory holds the metrics at their env steps
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=(run / "mlruns").resolve().as_uri())
    (found,) = client.search_runs([client.get_experiment_by_name("arena").experiment_id])
    history = client.get_metric_history(found.info.run_id, "episode_return_mean")
    assert [m.step for m in history] == [128, 256]
    assert found.data.params["algo"] == "ippo"


def test_bad_loggers_and_callbacks_are_named():
    cfg = TrainConfig(env="mpe/simple_spread-v3", loggers=["csv", "neptune"])
    with pytest.raises(ConfigError, match=r"unknown logger\(s\) \['neptune'\]; loggers: csv"):
        cfg.validate()
    cfg = TrainConfig(env="mpe/simple_spread-v3", callbacks=["not a ref"])
    with pytest.raises(ConfigError, match="must read module:Class"):
        cfg.validate()
    from training.checkpoints import RunError
    from training.run import user_callback

    with pytest.raises(RunError, match="cannot import"):
        user_callback("tests.training.test_loggers:Nope")
    with pytest.raises(RunError, match="not a training.run.Callback"):
        user_callback("tests.training.test_loggers:SMALL")
