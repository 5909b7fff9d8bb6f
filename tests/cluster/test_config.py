import pytest

from cluster.config import ConfigError, TrainConfig, apply_overrides


def test_overrides_are_typed():
    cfg = TrainConfig(env="mpe/simple_spread-v3")
    apply_overrides(
        cfg, ["lr=1e-3", "hidden=[128, 128]", "checkpoint_every=3", "env.max_cycles=50"]
    )
    assert cfg.ppo.lr == 1e-3 and cfg.ppo.hidden == [128, 128]
    assert cfg.checkpoint_every == 3 and cfg.env_args == {"max_cycles": 50}
    cfg.validate()


@pytest.mark.parametrize(
    "pair, message",
    [
        ("lrr=1", "unknown config key 'lrr'; allowed: .*lr"),
        ("lr=fast", "lr must be float"),
        ("num_epochs=2.5", "num_epochs must be int"),
        ("hidden=64", "hidden must be a list of int"),
        ("novalue", "key=value"),
    ],
)
def test_bad_overrides_name_what_is_allowed(pair, message):
    with pytest.raises(ConfigError, match=message):
        apply_overrides(TrainConfig(env="mpe/simple_spread-v3"), [pair])


def test_out_of_range_values_and_env_args_are_errors():
    cfg = TrainConfig(env="mpe/simple_spread-v3")
    apply_overrides(cfg, ["gamma=1.5"])
    with pytest.raises(ConfigError, match="gamma"):
        cfg.validate()
    cfg = TrainConfig(env="mpe/simple_spread-v3", env_args={"speed": 2})
    with pytest.raises(ValueError, match="allowed: .*max_cycles"):
        cfg.validate()


def test_round_trip_through_dict():
    cfg = TrainConfig(env="mpe/simple_spread-v3", algo="ippo", env_args={"N": 4})
    cfg.ppo.lr = 5e-4
    again = TrainConfig.from_dict(cfg.to_dict())
    assert again == cfg
