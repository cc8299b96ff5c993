"""The SGLang GPU images built for real, on a CPU host: `sglang` (stock),
`sglang-deepep` and `sglang-fi-fusion` of config/kimi-k25-8gpu.yaml on the
local base (config/kimi-k25-8gpu-local-base.yaml), built by the workflow's own
`build_image` rule (Snakemake, in a copy of the repository), then checked
inside: the launch entry point, SGLang's own parser over every argv of the GPU
matrix, the fusion patch, DeepEP's libraries, the labels, and no proxy CA in
any layer.

A cold build downloads and installs ~10 GB of wheels (torch CUDA, nvidia-*,
FlashInfer, ...): docs/measurements/2026-12-01-sglang-images/ has the times.
An unchanged image is found by its content-addressed tag and not rebuilt.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from specsweep.contracts.plan import Plan
from specsweep.engines.sglang.preflight import image_parser_prefix, preflight_plans
from specsweep.engines.variants import image_targets
from specsweep.images import cli, tag
from specsweep.plan.config import load_configs
from specsweep.plan.resolve import resolve_plans
from specsweep.testing.workflow import REPO

pytestmark = [pytest.mark.docker, pytest.mark.slow]

GPU_CONFIG = ["config/kimi-k25-8gpu.yaml"]
DUMMY = "config/kimi-k25-8gpu-dummy.yaml"
LOCAL_BASE = "config/kimi-k25-8gpu-local-base.yaml"
#: Image name -> its Dockerfile target: the stock image and each variant's (engines.variants' image targets) of
#: the GPU configuration, except what is built elsewhere: MSCCL++ compiles with nvcc (test_cuda_toolchain.py).
BUILT_ELSEWHERE = ("mscclpp",)
VARIANT = {name: spec["target"] for name, spec in load_configs([REPO / GPU_CONFIG[0]])["images"].items()
           if spec["target"] in {"stock", *image_targets("sglang").values()} and spec["target"] not in BUILT_ELSEWHERE}
IMAGES = tuple(VARIANT)
PATCH = REPO / "containers/patches/sglang-0.5.23-flashinfer-fusion-sm120.patch"
# What the Dockerfile's deps stage pins (sglang 0.5.23's Requires-Dist) and the
# labels must say; read back from the installed distributions below.
# What the revision label must say: git's own answer for this checkout, else `unknown` (an export).
_HEAD = subprocess.run(["git", "-c", "safe.directory=*", "-C", str(REPO), "rev-parse", "HEAD"],  # noqa: S607
                       capture_output=True, text=True)
REVISION = _HEAD.stdout.strip() if _HEAD.returncode == 0 else "unknown"
assert REVISION == "unknown" or re.fullmatch(r"[0-9a-f]{40}", REVISION), REVISION

PINS = {"sglang": "0.5.23", "torch": "2.14.1", "flashinfer-python": "0.7.2",
        "sglang-kernel": "0.4.10", "sgl-deep-ep": "0.1.2.post1"}
LABELS = {"sglang": "io.specsweep.sglang.version", "torch": "io.specsweep.torch.version",
          "flashinfer-python": "io.specsweep.flashinfer.version",
          "sglang-kernel": "io.specsweep.sglang-kernel.version", "sgl-deep-ep": "io.specsweep.sgl-deep-ep.version"}
SITE = ("import importlib.util, os; "
        "print(os.path.dirname(importlib.util.find_spec('sglang').submodule_search_locations[0]))")


def in_image(image: str, *argv: str, stdin: str | None = None, timeout: float = 300) -> subprocess.CompletedProcess:
    """Run argv in a throwaway container of ``image``: no network, no GPU."""
    return subprocess.run(
        ["docker", "run", "--rm", "-i", "--network", "none", image, *argv],
        input=stdin, capture_output=True, text=True, timeout=timeout, check=False,
    )


def _specs() -> dict:
    return load_configs([REPO / p for p in [*GPU_CONFIG, LOCAL_BASE]])["images"]


@pytest.fixture(scope="module")
def work(tmp_path_factory) -> Path:
    """An empty working directory: the Snakefile runs from the repository in
    place (`--directory`), so the images' sources are the repository's and
    their revision label is its HEAD (a copy without .git would label
    `unknown`). The configurations' model directories are mounted from
    `config/models` relative to it (their `volumes:`), so a copy of those is
    there: preflight checks that every mounted host path exists."""
    work = tmp_path_factory.mktemp("sglang-work")
    shutil.copytree(REPO / "config" / "models", work / "config" / "models")
    return work


def snakemake(work: Path, *args: str, configs: list[str], timeout: float = 3600) -> subprocess.CompletedProcess:
    argv = [sys.executable, "-m", "snakemake", "--snakefile", str(REPO / "Snakefile"), "--directory", str(work),
            "--cores", "1", *args, "--configfile", *[str(REPO / c) for c in configs]]
    return subprocess.run(argv, cwd=work, capture_output=True, text=True, timeout=timeout)  # noqa: S603


@pytest.fixture(scope="module")
def images(work, base_image) -> dict[str, dict]:
    """The three manifests, made by the `build_image` rule (a build, or the
    reuse of an image whose content tag exists)."""
    targets = [f"results/images/{name}.json" for name in IMAGES]
    result = snakemake(work, *targets, configs=[*GPU_CONFIG, LOCAL_BASE])
    logs = "".join((p.read_text()[-3000:] for p in sorted((work / "results/images/logs").glob("*.log")))) \
        if (work / "results/images/logs").is_dir() else ""
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:] + logs
    specs = _specs()
    out = {}
    for name in IMAGES:
        manifest = json.loads((work / f"results/images/{name}.json").read_text())
        assert manifest["tag"] == tag.image_tag(name, specs[name], REPO)
        out[name] = manifest
    return out


def test_built_by_the_rule_on_the_local_base_sharing_the_dependency_layers(images):
    layers = {name: cli.image_inspect(m["image_id"])["RootFS"]["Layers"] for name, m in images.items()}
    stock = layers["sglang"]
    base = cli.image_inspect("specsweep/debian:bookworm")["RootFS"]["Layers"]
    assert stock[: len(base)] == base
    # stock's last layer is the jit stage's RUN (3 kB: header links and record.json); BuildKit ran it again
    # for some targets here (the same files, other times: docs/measurements/2026-12-06-sglang-images-toolchain/),
    # so the variants are held to every layer before it: base, apt, venv, dependencies, the toolchain (281 MB)
    shared = stock[:-1]
    for name in (n for n in IMAGES if VARIANT[n] != "stock"):
        # the variant is stock's layers plus its own
        assert layers[name][: len(shared)] == shared, name
        assert 1 <= len(layers[name]) - len(stock) <= 2, (name, len(layers[name]), len(stock))
    for name, m in images.items():
        assert m["base_image"] == "specsweep/debian:bookworm"
        assert m["target"] == VARIANT[name]


def test_labels_carry_the_versions_that_are_installed(images):
    for name, m in images.items():
        labels = cli.image_inspect(m["image_id"])["Config"]["Labels"]
        assert labels["io.specsweep.variant"] == VARIANT[name]
        assert labels["io.specsweep.python"] == "python3.11"
        assert labels["org.opencontainers.image.base.name"] == "specsweep/debian:bookworm"
        assert labels["org.opencontainers.image.title"] == f"specsweep-sglang-{VARIANT[name]}"
        # The revision of the sources that built this content: this checkout's HEAD (or `unknown` where it is
        # no git repository) when built here; an image found by its content tag keeps the label of the build
        # that made it (another test builds from a copy without .git: `unknown`).
        revision = labels["org.opencontainers.image.revision"]
        if not m["reused"]:
            assert revision == REVISION, labels
        else:
            assert revision == "unknown" or re.fullmatch(r"[0-9a-f]{40}", revision), labels
        assert labels["io.specsweep.content-tag"] == m["tag"]
        for dist, key in LABELS.items():
            assert labels[key] == PINS[dist], (name, key)
        got = in_image(m["image_id"], "python3", "-c",
                       "import json, importlib.metadata as md; "
                       f"print(json.dumps({{d: md.version(d) for d in {sorted(PINS)!r}}}))")
        assert got.returncode == 0, got.stderr[-2000:]
        installed = json.loads(got.stdout)
        assert {d: v.split("+")[0] for d, v in installed.items()} == PINS, installed
    assert images["sglang-fi-fusion"]["labels"]["io.specsweep.patches"] == PATCH.name


@pytest.mark.parametrize("name", IMAGES)
def test_launch_entry_point_imports_and_prints_its_help(images, name):
    got = in_image(images[name]["image_id"], "python3", "-m", "sglang.launch_server", "--help", timeout=600)
    assert got.returncode == 0, got.stderr[-3000:]
    assert got.stdout.startswith("usage:"), got.stdout[:500]
    for flag in ("--model-path", "--tp-size", "--speculative-algorithm", "--enable-mscclpp",
                 "--moe-a2a-backend", "--enable-flashinfer-allreduce-fusion"):
        assert flag in got.stdout, flag


@pytest.mark.parametrize("config_set", ["weights", "dummy"])
def test_each_image_parses_every_argv_of_the_gpu_matrix(images, config_set):
    paths = [REPO / p for p in GPU_CONFIG] + ([REPO / DUMMY] if config_set == "dummy" else [])
    config = load_configs(paths)
    plans = {name: Plan.from_dict(plan) for name, plan in resolve_plans(config).items()}
    assert len(plans) >= 20
    for name, m in images.items():
        results = preflight_plans(list(plans.values()), image_parser_prefix(m["image_id"]), config["images"])
        assert set(results) == set(plans)
        if config_set == "dummy":
            bad = {n: r["errors"] for n, r in results.items() if not r["ok"]}
        else:  # real weights: /models is not mounted here, so only SGLang's parser must accept every argv
            bad = {n: [e for e in r["errors"] if e.startswith(f"configurations.{n}.server_args: ")]
                   for n, r in results.items()}
            bad = {n: e for n, e in bad.items() if e}
            assert all(r["errors"] for r in results.values()), "the missing /models mount must be reported"
        assert bad == {}, (name, bad)
        assert {r["sglang_version"] for r in results.values()} == {"0.5.23"}, name


def test_the_image_parser_rejects_a_typo(images):
    plan = Plan.from_dict(resolve_plans(load_configs([REPO / p for p in GPU_CONFIG]))["mscclpp"])
    server_args = {k: v for k, v in plan.server_args.items() if k != "enable-mscclpp"}
    plan = plan.replace(server_args={**server_args, "enable-msccl": True}, argv=())  # argv rebuilt from server_args
    result = preflight_plans([plan], image_parser_prefix(images["sglang"]["image_id"]))["mscclpp"]
    assert not result["ok"]
    assert any("--enable-msccl" in e and "configurations.mscclpp" in e for e in result["errors"]), result["errors"]


def test_preflight_rule_checks_with_the_built_image(work, images):
    """`preflight_parser: image`: the rule's input is the image manifest, and the
    parser venv is never made."""
    configs = [*GPU_CONFIG, DUMMY, LOCAL_BASE]
    targets = ["results/fi-fusion/preflight.json", "results/deepep/preflight.json", "results/eagle3/preflight.json"]
    parser_env = work / "parser-env"  # where a venv would be made, were one needed
    result = snakemake(work, *targets, "--config", "preflight_parser=image", f"parser_env={parser_env}",
                       configs=configs, timeout=1200)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    for target in targets:
        out = json.loads((work / target).read_text())
        assert out["ok"] is True, out
        assert out["checked_with"].startswith("sglang 0.5.23 ServerArgs parser, ModelConfig"), out
    assert not parser_env.exists()
    [log] = [p.read_text() for p in (work / "results/fi-fusion/plans").glob("*/logs/preflight_config.log")]
    assert "preflight ok: fi-fusion" in log


def _patch_in(image: str, *flags: str) -> subprocess.CompletedProcess:
    script = f'site="$(python3 -c "{SITE}")" && patch --dry-run --fuzz=0 -p1 {" ".join(flags)} -d "$site"'
    return in_image(image, "sh", "-c", script, stdin=PATCH.read_text())


def test_fi_fusion_files_are_the_patched_ones(images):
    fused, stock = images["sglang-fi-fusion"]["image_id"], images["sglang"]["image_id"]
    # In fi-fusion every hunk reverses cleanly (no fuzz): the files hold the
    # patch's result; in stock every hunk applies forward: they are released 0.5.23.
    reverse = _patch_in(fused, "--reverse", "--force")
    assert reverse.returncode == 0, reverse.stdout + reverse.stderr
    forward = _patch_in(stock, "--forward")
    assert forward.returncode == 0, forward.stdout + forward.stderr
    files = re.findall(r"^\+\+\+ b/(\S+)", PATCH.read_text(), re.M)
    assert len(files) >= 3
    assert sorted(re.findall(r"^checking file (\S+)", reverse.stdout, re.M)) == sorted(files)
    for rel in files:
        a = in_image(fused, "sh", "-c", f'cat "$(python3 -c "{SITE}")/{rel}"').stdout
        b = in_image(stock, "sh", "-c", f'cat "$(python3 -c "{SITE}")/{rel}"').stdout
        assert a and b and a != b, rel


LDD = (
    "import glob, importlib.util, os, pathlib, subprocess\n"
    "so = sorted(pathlib.Path(importlib.util.find_spec('deep_ep').submodule_search_locations[0]).glob('_C*.so'))[0]\n"
    "torchlib = pathlib.Path(importlib.util.find_spec('torch').origin).parent / 'lib'\n"
    "env = dict(os.environ, LD_LIBRARY_PATH=':'.join(filter(None, [os.environ.get('LD_LIBRARY_PATH'), "
    "str(torchlib)])))\n"
    "print(so)\n"
    "print(subprocess.run(['ldd', str(so)], env=env, capture_output=True, text=True, check=True).stdout)\n"
)


def test_deepep_extension_resolves_its_libraries(images):
    got = in_image(images["sglang-deepep"]["image_id"], "python3", "-c", LDD)
    assert got.returncode == 0, got.stderr[-2000:]
    lines = got.stdout.splitlines()
    missing = [ln.strip() for ln in lines if "not found" in ln]
    # libcuda.so.1 is the driver's: the NVIDIA container runtime mounts it from the GPU host.
    assert [m for m in missing if not m.startswith("libcuda.so.1")] == [], got.stdout
    nvshmem = [ln for ln in lines if "libnvshmem_host" in ln]
    assert nvshmem and "/opt/venv/" in nvshmem[0], got.stdout


def test_proxy_ca_is_in_no_layer_of_any_sglang_image(images, base_image, proxy_ca_scan):
    """The existing scan (specsweep.testing.proxy_ca.scan_images_for_proxy_ca), over all
    three images at once: every file of every layer, configs, history."""
    scan = proxy_ca_scan([m["tag"] for m in images.values()], base_image)
    assert scan["layers"] >= 4 and scan["files"] > 50_000, scan
    assert not scan["hits"], f"proxy CA found in an SGLang image: {scan['hits']}"
    print(json.dumps({k: v for k, v in scan.items() if k != "hits"}))
