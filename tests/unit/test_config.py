"""Settings: defaults, YAML file, RUNPLANE_* variables with __ nesting, presets, bad config."""

from __future__ import annotations

import pytest

from runplane.config import PREEMPTIBLE_PRESETS, load_settings
from runplane.errors import ConfigError


def test_documented_defaults():
    settings = load_settings()
    assert settings.function_defaults.preemption_mode == "prevent"
    assert settings.function_defaults.priority_class == "medium"
    assert settings.priority_classes.valid == ["low", "medium", "high"]
    assert settings.spot.node_selector == {"app.iguazio.com/lifecycle": "preemptible"}
    assert settings.spot.tolerations == [
        {
            "key": "app.iguazio.com/lifecycle",
            "operator": "Equal",
            "value": "preemptible",
            "effect": "NoSchedule",
        }
    ]
    assert settings.function_defaults.state_thresholds == {
        "pending_scheduled": "1h",
        "pending_not_scheduled": -1,
        "image_pull_backoff": "1h",
        "running": "24h",
    }


def test_environment_nesting(monkeypatch):
    monkeypatch.setenv("RUNPLANE_FUNCTION_DEFAULTS__PREEMPTION_MODE", "Constrain")
    monkeypatch.setenv("RUNPLANE_PREEMPTIBLE_NODES_PRESET", "karpenter")
    monkeypatch.setenv("RUNPLANE_FUNCTION_DEFAULTS__STATE_THRESHOLDS", '{"running": "2h"}')
    settings = load_settings()
    assert settings.function_defaults.preemption_mode == "constrain"
    assert settings.spot.node_selector == {"karpenter.sh/capacity-type": "spot"}
    assert settings.function_defaults.state_thresholds["running"] == "2h"
    assert settings.function_defaults.state_thresholds["pending_scheduled"] == "1h"


def test_yaml_file_and_environment_precedence(monkeypatch, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(
        "namespace: ml-jobs\n"
        "function_defaults:\n"
        "  priority_class: low\n"
        "  resources: {requests: {cpu: 250m}}\n"
        "preemptible_nodes:\n"
        "  node_selector: {pool: spot}\n"
        "  tolerations: [{key: pool, operator: Equal, value: spot, effect: NoSchedule}]\n"
    )
    monkeypatch.setenv("RUNPLANE_CONFIG", str(config))
    monkeypatch.setenv("RUNPLANE_NAMESPACE", "from-env")
    settings = load_settings()
    assert settings.namespace == "from-env"
    assert settings.function_defaults.priority_class == "low"
    assert settings.function_defaults.resources.requests == {"cpu": "250m"}
    assert settings.spot.node_selector == {"pool": "spot"}


@pytest.mark.parametrize("preset", sorted(PREEMPTIBLE_PRESETS))
def test_presets_are_complete(preset):
    spot = load_settings(preemptible_nodes_preset=preset).spot
    assert spot.node_selector
    for toleration in spot.tolerations:
        assert toleration["key"] in spot.node_selector


def test_bad_configuration_is_a_clear_error(monkeypatch):
    monkeypatch.setenv("RUNPLANE_FUNCTION_DEFAULTS__PREEMPTION_MODE", "sometimes")
    with pytest.raises(ConfigError) as caught:
        load_settings()
    message = str(caught.value)
    assert message.startswith(
        "configuration function_defaults.preemption_mode: Input should be "
        "'none', 'prevent', 'constrain' or 'allow' (got 'sometimes')"
    )
    assert "RUNPLANE_FUNCTION_DEFAULTS__PREEMPTION_MODE" in message


def test_bad_default_quantity(monkeypatch):
    monkeypatch.setenv("RUNPLANE_FUNCTION_DEFAULTS__RESOURCES", '{"limits": {"memory": "2g"}}')
    with pytest.raises(ConfigError, match=r"spec.resources.limits.memory: '2g' is not valid"):
        load_settings()
