"""Volumes: host paths checked before launch, container paths mapped back to the host."""

from __future__ import annotations

from pathlib import Path

from specsweep.contracts.plan import Plan
from specsweep.engines.volumes import host_path, parse_volume, volume_problems
from specsweep.testing.doubles import plan_dict


def _plan(volumes, runtime="docker", **keys) -> Plan:
    return Plan.from_dict(plan_dict(name="cfg", engine="sglang", runtime=runtime, volumes=volumes, **keys))


def test_missing_host_path_names_the_key(tmp_path: Path):
    (tmp_path / "models").mkdir()
    plan = _plan(["models:/specsweep-models:ro", "/no/such/weights:/models:ro"])
    problems = volume_problems(plan, tmp_path)
    assert len(problems) == 1
    assert problems[0].startswith("configurations.cfg.volumes[1]: host path /no/such/weights")
    assert "/models" in problems[0]


def test_relative_host_paths_start_at_base(tmp_path: Path):
    v = parse_volume("config/models:/specsweep-models:ro", tmp_path)
    assert v.host == tmp_path / "config" / "models" and str(v.container) == "/specsweep-models" and v.mode == "ro"


def test_container_path_maps_to_the_longest_volume(tmp_path: Path):
    plan = _plan([f"{tmp_path}/a:/models", f"{tmp_path}/b:/models/kimi"])
    assert host_path(plan, "/models/kimi/config", tmp_path) == (tmp_path / "b" / "config", None)
    assert host_path(plan, "/models/other", tmp_path) == (tmp_path / "a" / "other", None)
    path, why = host_path(plan, "/elsewhere/x", tmp_path)
    assert path is None and "under no `volumes:` entry" in why


def test_local_runtime_paths_are_host_paths(tmp_path: Path):
    assert host_path(_plan([], runtime="local"), "models/x", tmp_path) == (tmp_path / "models" / "x", None)


def test_model_check_items_map_container_paths_to_the_host(tmp_path: Path):
    from specsweep.engines.sglang.preflight import model_check_item

    (tmp_path / "models" / "m").mkdir(parents=True)
    plan = _plan(["models:/w:ro"], env={"A": "1"}, server_args={"model-path": "/w/m", "tp-size": 8})
    item, errors, warnings = model_check_item(plan, tmp_path)
    assert errors == [] and warnings == []
    assert item == {"name": "cfg", "argv": ["--model-path", str(tmp_path / "models" / "m"), "--tp-size", "8"],
                    "env": {"A": "1"}}
    item, errors, _ = model_check_item(plan.replace(server_args={"model-path": "/w/absent"}), tmp_path)
    assert item is None and errors == [
        f"configurations.cfg.server_args.model-path: /w/absent (on this host {tmp_path}/models/absent) "
        f"is not a directory on this host"]
    item, errors, warnings = model_check_item(plan.replace(server_args={"model-path": "org/model"}), tmp_path)
    assert item is None and errors == [] and "hub id" in warnings[0]
