"""A node never builds: before launch the docker runtime pulls the image by its
content-addressed tag from `registry:` when it is absent, and checks the
pulled image id against the manifest. Against the real engine and the local
registry of .ci/setup-docker.sh, with a small image made from the base."""

from __future__ import annotations

import io
import json
import subprocess

import pytest

from specsweep.images import cli
from specsweep.images import registry as registries
from specsweep.serve.job import JobPaths, run_config
from specsweep.testing.doubles import plan_dict

pytestmark = pytest.mark.docker


def _remove_local(*refs: str) -> None:
    for ref in refs:
        subprocess.run(["docker", "rmi", ref], capture_output=True)


@pytest.fixture
def pushed(tmp_path, base_image, registry_url, unique):
    """A one-layer image of its own (a unique label gives it its own id), pushed, then removed locally."""
    (tmp_path / "Dockerfile").write_text(f"FROM {base_image}\nLABEL io.specsweep.test-pull={unique}\n")
    tag = f"specsweep/pulltest-{unique}:{unique}0000"
    subprocess.run(["docker", "build", "-q", "-t", tag, str(tmp_path)], check=True, capture_output=True)
    manifest = {"name": f"pulltest-{unique}", "tag": tag, "image_id": cli.image_inspect(tag)["Id"]}
    registry = {"url": registry_url, "namespace": "specsweep-test"}
    pushed = registries.push_image(manifest, registry, tmp_path / "push.log")
    _remove_local(tag, pushed["ref"])
    assert not cli.image_exists(manifest["image_id"]), "the image must really be gone from this host"
    yield manifest, registry
    _remove_local(tag, pushed["ref"])


def test_an_absent_image_is_pulled_by_its_content_tag_and_checked(pushed, tmp_path):
    manifest, registry = pushed
    got = registries.ensure_image(manifest, registry, log=tmp_path / "pull.log")
    assert got["source"] == "pulled" and got["image_id"] == manifest["image_id"]
    assert got["ref"] == registries.registry_ref(manifest, registry)
    assert got["repo_digest"] and got["repo_digest"].startswith(got["ref"].rsplit(":", 1)[0] + "@sha256:")
    # The content tag now names the pulled image, so `docker run` runs exactly what a local run would.
    assert cli.image_inspect(manifest["tag"])["Id"] == manifest["image_id"]
    assert registries.ensure_image(manifest, registry)["source"] == "local"


def test_a_pulled_image_with_another_id_is_refused(pushed, base_image):
    manifest, registry = pushed
    wrong = dict(manifest, image_id=cli.image_inspect(base_image)["Id"])
    with pytest.raises(cli.DockerError, match="says"):
        registries.ensure_image(wrong, registry)
    assert not cli.image_exists(manifest["tag"]), "a refused image gets no content tag"
    # ...and so is a local tag that names another image than the manifest's.
    registries.ensure_image(manifest, registry)
    with pytest.raises(cli.DockerError, match="stale or foreign"):
        registries.ensure_image(wrong, registry)


def test_without_a_registry_an_absent_image_is_a_launch_failure_not_a_build(pushed, tmp_path):
    manifest, _ = pushed
    with pytest.raises(cli.DockerError, match="snakemake push"):
        registries.ensure_image(manifest, None)
    plan = plan_dict(name="pulltest", engine="reference", runtime="docker", image=manifest["name"],
                     argv=["python3", "-m", "specsweep.refengine"], ready_timeout_s=10)
    paths = JobPaths(*(tmp_path / n for n in ("launch.json", "server.log", "warmup.jsonl", "requests.jsonl",
                                              "outcome.json")))
    outcome = run_config(plan, paths, manifest, io.StringIO(), registry=None)
    assert (outcome["status"], outcome["stage"], outcome["reason"]) == ("failed", "launch", "image_unavailable")
    assert "registry" in outcome["detail"]
    assert not cli.image_exists(manifest["image_id"]), "nothing was built"
    assert json.loads(paths.outcome.read_text())["reason"] == "image_unavailable"
