"""docs/deploy.md lists every configuration key with its SKIFF_ variable, so the table
stays in step with broker/config.py; the image's default properties are valid."""

from __future__ import annotations

from pathlib import Path

from broker.config import BROKER_CONFIGS, env_key, load_config

REPO = Path(__file__).resolve().parents[2]


def test_every_key_and_its_variable_is_documented() -> None:
    text = (REPO / "docs" / "deploy.md").read_text()
    missing = [k for k in BROKER_CONFIGS if f"| `{k}` | `{env_key(k)}` |" not in text]
    assert missing == [], f"docs/deploy.md lacks rows for {missing}"


def test_image_default_properties_load_without_warnings() -> None:
    warnings: list[str] = []
    cfg = load_config(REPO / "deploy" / "docker" / "server.properties", {}, {},
                      warn=warnings.append)
    assert warnings == []
    assert cfg.is_broker and cfg.is_controller
    assert [v.node_id for v in cfg.voters] == [cfg.node_id]
    assert [str(a) for a in cfg.advertised_listeners if a.name == "PLAINTEXT"] == [
        "PLAINTEXT://localhost:9092"]
