"""Labelled containers: found by label, removed before a new launch, and a
removal of a missing container is not an error."""

from __future__ import annotations

import subprocess

import pytest

from specsweep.serve import container

pytestmark = pytest.mark.docker


CHECKOUT = "0123456789abcdef"


def _start(name: str, config: str, image: str, checkout: str = CHECKOUT) -> None:
    subprocess.run(
        ["docker", "run", "-d", "--init", "--name", name,
         "--label", f"io.specsweep.config={config}", "--label", container.PROJECT_LABEL,
         "--label", f"io.specsweep.checkout={checkout}",
         image, "sleep", "600"],
        check=True, capture_output=True,
    )


def test_remove_leftovers_removes_only_that_configuration_of_this_checkout(base_image, unique):
    config, other = f"leftover-{unique}", f"other-{unique}"
    names = [f"specsweep-{config}-a", f"specsweep-{config}-b"]
    keep = f"specsweep-{other}"
    elsewhere = f"specsweep-{config}-other-checkout"
    try:
        for n in names:
            _start(n, config, base_image)
        _start(keep, other, base_image)
        _start(elsewhere, config, base_image, checkout="fedcba9876543210")
        assert container.containers_with_label(f"io.specsweep.config={config}") == sorted(names + [elsewhere])
        assert set(names + [keep]) <= set(container.containers_with_label())
        assert container.remove_leftovers(config, CHECKOUT) == sorted(names)
        assert container.containers_with_label(f"io.specsweep.config={config}") == [elsewhere]
        assert container.containers_with_label(f"io.specsweep.config={other}") == [keep]
    finally:
        for n in names + [keep, elsewhere]:
            subprocess.run(["docker", "rm", "-f", n], capture_output=True)


def test_remove_container_missing_is_false(docker_engine, unique):
    assert container.remove_container(f"specsweep-never-{unique}") is False


def test_stopped_containers_count_as_leftovers(base_image, unique):
    config = f"stopped-{unique}"
    name = f"specsweep-{config}"
    try:
        subprocess.run(["docker", "create", "--name", name, "--label", f"io.specsweep.config={config}",
                        "--label", f"io.specsweep.checkout={CHECKOUT}", base_image, "true"],
                       check=True, capture_output=True)
        assert container.remove_leftovers(config, CHECKOUT) == [name]
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)
