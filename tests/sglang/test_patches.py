"""Every patch under containers/patches applies to the pinned SGLang wheel,
with the very command the Dockerfile uses (patch --dry-run --fuzz=0 -p1 -d
<site-packages>). Downloads sglang==0.5.23 from PyPI, so it is marked slow;
it FAILS (never skips) when a patch no longer applies."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from specsweep.testing.workflow import REPO

PATCHES = sorted((REPO / "containers/patches").glob("*.patch"))


def _sglang_version(patch: Path) -> str:
    m = re.match(r"sglang-(\d+\.\d+\.\d+)-", patch.name)
    assert m, f"{patch.name}: name must start with sglang-<version>-"
    return m.group(1)


@pytest.fixture(scope="module")
def wheel_dirs(tmp_path_factory) -> dict[str, Path]:
    """Unpacked sglang wheels (site-packages layout), one per version patched."""
    out = {}
    for version in sorted({_sglang_version(p) for p in PATCHES}):
        dl = tmp_path_factory.mktemp(f"dl-{version}")
        subprocess.run(
            [sys.executable, "-m", "pip", "download", f"sglang=={version}", "--no-deps",
             "--only-binary=:all:", "-d", str(dl)],
            check=True, capture_output=True, text=True, timeout=900,
        )
        wheel = next(dl.glob("sglang-*.whl"))
        site = tmp_path_factory.mktemp(f"site-{version}")
        with zipfile.ZipFile(wheel) as zf:
            zf.extractall(site)
        out[version] = site
    return out


@pytest.mark.slow
@pytest.mark.parametrize("patch", PATCHES, ids=lambda p: p.name)
def test_patch_applies_to_pinned_wheel(patch, wheel_dirs, tmp_path):
    assert shutil.which("patch"), "the `patch` tool is needed (apt-get install patch)"
    site = tmp_path / "site"
    shutil.copytree(wheel_dirs[_sglang_version(patch)], site)
    dry = subprocess.run(["patch", "--dry-run", "--forward", "--fuzz=0", "-p1", "-d", str(site)],
                         stdin=patch.open("rb"), capture_output=True, text=True)
    assert dry.returncode == 0, f"{patch.name} no longer applies:\n{dry.stdout}{dry.stderr}"
    real = subprocess.run(["patch", "--forward", "--fuzz=0", "--no-backup-if-mismatch", "-p1", "-d", str(site)],
                          stdin=patch.open("rb"), capture_output=True, text=True)
    assert real.returncode == 0, real.stdout + real.stderr
    touched = re.findall(r"^\+\+\+ b/(\S+)", patch.read_text(), re.M)
    assert touched
    for rel in touched:
        subprocess.run([sys.executable, "-m", "py_compile", str(site / rel)], check=True)
    # Applying twice must be detected (the build would otherwise double-patch).
    again = subprocess.run(["patch", "--dry-run", "--forward", "--fuzz=0", "-p1", "-d", str(site)],
                           stdin=patch.open("rb"), capture_output=True, text=True)
    assert again.returncode != 0


@pytest.mark.slow
def test_fusion_patch_enables_sm120_in_every_gate(wheel_dirs, tmp_path):
    patch = REPO / "containers/patches/sglang-0.5.23-flashinfer-fusion-sm120.patch"
    site = tmp_path / "site"
    shutil.copytree(wheel_dirs["0.5.23"], site)
    subprocess.run(["patch", "--forward", "--fuzz=0", "-p1", "-d", str(site)], stdin=patch.open("rb"),
                   check=True, capture_output=True)
    fusion = (site / "sglang/srt/layers/flashinfer_comm_fusion.py").read_text()
    add_norm = (site / "sglang/srt/layers/layer_boundary/residual/add_norm.py").read_text()
    overrides = (site / "sglang/srt/arg_groups/overrides.py").read_text()
    assert "get_platform().is_sm100 or get_platform().is_sm120" in fusion
    assert "CUDA_ERROR_NOT_SUPPORTED" in fusion
    assert "(_is_sm90_supported or _is_sm100_supported or _is_sm120_supported)" in add_norm
    assert "or get_platform().is_sm120\n        )\n        and view.tp_size > 1" in overrides
