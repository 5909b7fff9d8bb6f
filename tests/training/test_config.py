import re

import pytest

from training.config import ConfigError, TrainConfig, apply_overrides


def test_overrides_are_typed():
    cfg = TrainConfig(env="mpe/simple_spread-v3")
    apply_overrides(
        cfg,
        [
            "lr=1e-3",
            "model.hidden=[128, 128]",
            "model.recurrent=true",
            "mappo.gamma=0.9",
            "checkpoint_every=3",
            "env.max_cycles=50",
            "policies=per_agent",
            "learners=1",
        ],
    )
    assert cfg.settings.lr == 1e-3 and cfg.settings.model.hidden == [128, 128]
    assert cfg.settings.model.recurrent and cfg.settings.gamma == 0.9
    assert cfg.policies == "per_agent" and cfg.learners == 1
    assert cfg.checkpoint_every == 3 and cfg.env_args == {"max_cycles": 50}
    cfg.validate()


@pytest.mark.parametrize(
    "pair, message",
    [
        ("lrr=1", "unknown config key 'lrr'; allowed: .*lr"),
        ("lr=fast", "lr must be float"),
        ("num_epochs=2.5", "num_epochs must be int"),
        ("model.hidden=64", "model.hidden must be a list of int"),
        ("model.recurrent=3", "model.recurrent must be true or false"),
        ("model.depth=3", "unknown config key 'model.depth'"),
        ("ippo.lr=1", "unknown config key 'ippo.lr'"),
        ("model=1", "model is a group of settings; set its keys as model.KEY"),
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


@pytest.mark.parametrize(
    "pair, words",
    [
        ("lr=.inf", "not finite"),
        ("lr=.nan", "not finite"),
        ("grad_clip=-1", "grad_clip=-1.0"),
        ("vf_clip_param=-1", "vf_clip_param=-1.0"),
        ("kl_coeff=-0.1", "kl_coeff=-0.1"),
        ("minibatch_size=5000", "minibatch_size=5000"),
        ("seed=-1", "seed must be in"),
        ("seed=4294967296", "seed must be in"),
        ("learners=-1", "learners must be >= 0"),
        ("policies=mine", "policies must be one of"),
        ("model.max_seq_len=0", "model.max_seq_len=0"),
    ],
)
def test_values_out_of_range_are_refused_before_training(pair, words):
    cfg = TrainConfig(env="mpe/simple_spread-v3")
    apply_overrides(cfg, [pair])
    with pytest.raises(ConfigError, match=re.escape(words)):
        cfg.validate()


def test_round_trip_through_dict_keeps_settings_under_the_algorithms_name():
    cfg = TrainConfig(env="mpe/simple_spread-v3", algo="ippo", env_args={"N": 4})
    cfg.settings.lr = 5e-4
    cfg.settings.model.recurrent = True
    data = cfg.to_dict()
    assert data["ippo"]["lr"] == 5e-4 and "ppo" not in data and "settings" not in data
    again = TrainConfig.from_dict(data)
    assert again == cfg


def test_switching_algorithm_keeps_common_settings_and_v1_configs_load():
    cfg = TrainConfig(env="mpe/simple_spread-v3", algo="ippo")
    apply_overrides(cfg, ["lr=2e-4", "algo=mappo"])
    assert cfg.algo == "mappo" and type(cfg.settings).__name__ == "MAPPOSettings"
    assert cfg.settings.lr == 2e-4
    v1 = {"env": "mpe/simple_spread-v3", "algo": "mappo", "ppo": {"lr": 3e-4, "hidden": [32]}}
    old = TrainConfig.from_dict(v1)
    assert old.settings.lr == 3e-4 and old.settings.model.hidden == [32]
    with pytest.raises(ConfigError, match="settings for 'ippo' but the algorithm is 'mappo'"):
        TrainConfig.from_dict({"env": "mpe/simple_spread-v3", "algo": "mappo", "ippo": {}})


@pytest.mark.parametrize(
    "content, words",
    [
        (b"a: &x [1, 2]\nb: [*x, *x]\n", "YAML aliases are not allowed"),
        (b"\xff\xfe\x00garbage", "not UTF-8"),
        (b"- 1\n- 2\n", "expected a mapping of config keys, got list"),
        (b"env: [\n", "not valid YAML"),
        (b"env: mpe/simple_spread-v3\nmappo: 5\n", "'mappo' must be a mapping"),
        (b"env: mpe/simple_spread-v3\n" + b"#" * (1024 * 1024 + 1), "a config is at most"),
    ],
)
def test_bad_config_files_are_one_line_naming_the_file(tmp_path, content, words):
    from training.config import load_yaml

    path = tmp_path / "bad.yaml"
    path.write_bytes(content)
    with pytest.raises(ConfigError, match=re.escape(words)) as e:
        load_yaml(str(path))
    assert "\n" not in str(e.value) and len(str(e.value)) < 300
    if words != "'mappo' must be a mapping":
        assert str(path) in str(e.value)


def test_the_demo_is_a_config_file_a_user_can_train_from():
    from training.commands import DEMO_CONFIG
    from training.config import load_yaml

    cfg = load_yaml(str(DEMO_CONFIG))
    cfg.validate()
    assert (cfg.env, cfg.algo, cfg.timesteps) == ("mpe/simple_spread-v3", "mappo", 1_000_000)
    assert (cfg.settings.lr, cfg.settings.minibatch_size, cfg.settings.num_epochs) == (
        2e-3,
        2048,
        10,
    )
    assert "arena train --config training/configs/demo.yaml" in DEMO_CONFIG.read_text()
