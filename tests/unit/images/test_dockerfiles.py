"""Static checks of every Dockerfile under containers/: pins, ARG reasons,
labels, no in-place source edits, nothing floating (`:latest`, `main`)."""

from __future__ import annotations

import re
import shutil

import pytest
import yaml

from specsweep.images.tag import _logical_lines
from specsweep.testing.workflow import REPO

DOCKERFILES = sorted((REPO / "containers").rglob("Dockerfile"))
SGLANG = REPO / "containers/sglang/Dockerfile"
REFERENCE = REPO / "containers/reference/Dockerfile"

# What the sglang 0.5.23 wheel's METADATA requires (Requires-Dist), checked by hand.
SGLANG_PINS = {
    "SGLANG_VERSION": "0.5.23",
    "TORCH_VERSION": "2.14.1",
    "FLASHINFER_VERSION": "0.7.2",
    "SGLANG_KERNEL_VERSION": "0.4.10",
    "SGL_DEEP_EP_VERSION": "0.1.2.post1",
}


def _arg_defaults(text: str) -> dict[str, str]:
    out = {}
    for m in re.finditer(r"^ARG\s+([A-Za-z_][A-Za-z0-9_]*)(?:=(\S*))?\s*$", text, re.M):
        out.setdefault(m.group(1), m.group(2))
    return out


def test_there_are_dockerfiles():
    assert SGLANG in DOCKERFILES and REFERENCE in DOCKERFILES


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: str(p.relative_to(REPO)))
def test_every_arg_has_a_reason_comment(path):
    lines = path.read_text().splitlines()
    missing = []
    for i, line in enumerate(lines):
        if line.startswith("ARG "):
            prev = lines[i - 1].strip() if i else ""
            if not prev.startswith("#") or len(prev.lstrip("# ")) < 8:
                missing.append(f"line {i + 1}: {line}")
    assert not missing, "ARGs without a one-line reason comment above them:\n" + "\n".join(missing)


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: str(p.relative_to(REPO)))
def test_no_sed_in_place_and_nothing_floating(path):
    text = path.read_text()
    code = "\n".join(_logical_lines(text))
    assert not re.search(r"\bsed\b[^\n]*\s-i", code), "use a patch under containers/patches, not sed -i"
    assert ":latest" not in code
    assert not re.search(r"(--branch|checkout|@)\s*(main|master)\b", code)


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: str(p.relative_to(REPO)))
def test_from_is_configurable(path):
    text = path.read_text()
    froms = re.findall(r"^FROM\s+(\S+)", text, re.M)
    stages = set(re.findall(r"^FROM\s+\S+\s+AS\s+(\S+)", text, re.M))
    # a stage chosen by an ARG (`mscclpp-src-${MSCCLPP_SOURCE}`) must name stages that exist
    chosen = [f for f in froms if re.fullmatch(r"[a-z0-9-]+\$\{[A-Z_]+\}", f)]
    for f in chosen:
        prefix = f.split("${")[0]
        assert any(s.startswith(prefix) for s in stages), (f, stages)
    externals = [f for f in froms if not re.fullmatch(r"[a-z0-9-]+", f) and f not in chosen]  # stage names are fine
    assert externals and all(f.startswith("${") for f in externals), froms


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: str(p.relative_to(REPO)))
def test_oci_and_specsweep_labels(path):
    text = path.read_text()
    for key in ("source", "revision", "version", "created", "title"):
        assert f"org.opencontainers.image.{key}=" in text, key
    assert "io.specsweep.variant=" in text


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: str(p.relative_to(REPO)))
def test_exec_form_cmd_and_entrypoint(path):
    for line in _logical_lines(path.read_text()):
        word = line.split()[0].upper()
        if word in ("CMD", "ENTRYPOINT"):
            assert line.split(None, 1)[1].startswith("["), line


@pytest.mark.parametrize("path", DOCKERFILES, ids=lambda p: str(p.relative_to(REPO)))
def test_proxy_ca_only_as_secret_mount(path):
    text = path.read_text()
    assert "ca-certificates.crt" not in "\n".join(_logical_lines(text)), "the host CA bundle must not be copied"
    for line in _logical_lines(text):
        if "proxy_ca" in line and line.split()[0].upper() == "RUN":
            assert "--mount=type=secret,id=proxy_ca" in line


def test_sglang_pins_match_the_wheel_metadata():
    args = _arg_defaults(SGLANG.read_text())
    for key, value in SGLANG_PINS.items():
        assert args.get(key) == value, (key, args.get(key))
    text = SGLANG.read_text()
    for pin in ('"torch==${TORCH_VERSION}"', '"sglang==${SGLANG_VERSION}"',
                '"flashinfer_python[cu13]==${FLASHINFER_VERSION}"', '"sglang-kernel==${SGLANG_KERNEL_VERSION}"',
                '"sgl-deep-ep==${SGL_DEEP_EP_VERSION}"'):
        assert pin in text
    assert "io.specsweep.sglang.version=" in text


def test_sglang_targets():
    stages = re.findall(r"^FROM\s+\S+\s+AS\s+(\S+)", SGLANG.read_text(), re.M)
    for target in ("stock", "mscclpp", "deepep", "fi-fusion"):
        assert target in stages


def test_mscclpp_pinned_to_tag_and_commit_with_sm120():
    args = _arg_defaults(SGLANG.read_text())
    assert re.fullmatch(r"v\d+\.\d+\.\d+", args["MSCCLPP_TAG"])
    assert re.fullmatch(r"[0-9a-f]{40}", args["MSCCLPP_COMMIT"])
    assert "120" in args["MSCCLPP_GPU_ARCHS"].split(";")
    text = SGLANG.read_text()
    assert 'rev-parse HEAD)" = "${MSCCLPP_COMMIT}"' in text


def test_fusion_patch_applied_with_a_failing_check():
    text = SGLANG.read_text()
    patch = "containers/patches/sglang-0.5.23-flashinfer-fusion-sm120.patch"
    assert (REPO / patch).is_file()
    assert f"source={patch}" in text
    assert "patch --dry-run --forward --fuzz=0 -p1" in text


def test_reference_image_uses_cpu_torch_and_local_base():
    args = _arg_defaults(REFERENCE.read_text())
    assert args["BASE_IMAGE"] == "specsweep/debian:bookworm"
    assert args["TORCH_VERSION"].endswith("+cpu")
    text = REFERENCE.read_text()
    assert "COPY --from=builder /opt/venv /opt/venv" in text
    assert "FROM ${BASE_IMAGE} AS runtime" in text


def test_make_base_image_script_is_strict():
    text = (REPO / "scripts/make_base_image.sh").read_text()
    assert "set -euo pipefail" in text and "docker import" in text.replace('"$DOCKER" import', "docker import")
    assert shutil.which("bash")


def test_sglang_two_bases_one_file():
    args = _arg_defaults(SGLANG.read_text())
    # the default is what a connected host pulls; the local base comes from the overlay
    assert args["BASE_IMAGE"] == "nvidia/cuda:13.0.1-cudnn-devel-ubuntu24.04"
    assert args["PYTHON"] == "python3.12"
    overlay = yaml.safe_load((REPO / "config/kimi-k25-8gpu-local-base.yaml").read_text())
    for name in ("sglang", "sglang-deepep", "sglang-fi-fusion"):
        assert overlay["images"][name]["build_args"] == {"BASE_IMAGE": "specsweep/debian:bookworm",
                                                         "PYTHON": "python3.11"}
    text = SGLANG.read_text()
    assert "python3.1" not in "\n".join(line for line in _logical_lines(text) if not line.startswith("ARG ")), \
        "a python-version path outside the PYTHON arg"
    assert "${SITE_PACKAGES}/nvidia/cu13/lib" in text  # deepep's libcudart on either base
    mscclpp = overlay["images"]["sglang-mscclpp"]
    assert {k: mscclpp["build_args"][k] for k in ("BASE_IMAGE", "PYTHON", "MSCCLPP_SOURCE")} == \
        {"BASE_IMAGE": "specsweep/debian:bookworm", "PYTHON": "python3.11", "MSCCLPP_SOURCE": "context"}
    assert {"90", "120"} <= set(mscclpp["build_args"]["MSCCLPP_GPU_ARCHS"].split(";"))
    assert set(mscclpp["build_contexts"]) == {"mscclpp_src"}


def test_cuda_toolchain_from_the_base_or_from_wheels_of_the_venvs_cuda():
    text = SGLANG.read_text()
    assert "FROM base AS cuda-toolchain" in text and "FROM cuda-toolchain AS cuda-toolchain-check" in text
    assert "if [ -x /usr/local/cuda/bin/nvcc ]; then" in text  # the devel base's own toolkit when present
    wheels = dict(w.split("==") for w in re.search(r'^ARG CUDA_TOOLKIT_WHEELS="([^"]+)"$', text, re.M)[1].split())
    assert wheels["nvidia-cuda-nvcc"] == "13.0.88"
    # the cudart the toolchain links is the one the venv runs (the cuda-toolkit metapackage's set)
    pins = dict(ln.split("==") for ln in (REPO / "containers/sglang/constraints.txt").read_text().splitlines()
                if ln and not ln.startswith("#"))
    assert wheels["nvidia-cuda-runtime"] == pins["nvidia-cuda-runtime"]
    assert pins["cuda-toolkit"].startswith("13.0.")
    assert {"nvidia-cuda-crt", "nvidia-nvvm", "nvidia-cuda-cccl", "nvidia-nvml-dev"} <= set(wheels)
    assert "containers/sglang/cuda_link_stubs.py" in text and "check_device_code.sh" in text


def test_mscclpp_source_from_git_or_a_staged_context():
    text = SGLANG.read_text()
    stages = set(re.findall(r"^FROM\s+\S+\s+AS\s+(\S+)", text, re.M))
    assert {"mscclpp-src-git", "mscclpp-src-context"} <= stages
    assert "FROM mscclpp-src-${MSCCLPP_SOURCE} AS mscclpp-build" in text
    args = _arg_defaults(text)
    assert args["MSCCLPP_SOURCE"] == "git"
    assert re.fullmatch(r"[0-9a-f]{40}", args["MSCCLPP_TREE"])
    assert "COPY _contexts/mscclpp_src /src" in text
    for define in ("FETCHCONTENT_FULLY_DISCONNECTED=ON", "FETCHCONTENT_SOURCE_DIR_JSON=",
                   "FETCHCONTENT_SOURCE_DIR_NANOBIND=", "FETCHCONTENT_SOURCE_DIR_DLPACK="):
        assert define in text, define
    script = (REPO / "scripts/stage_mscclpp_source.sh").read_text()
    assert f"PIN_MSCCLPP_COMMIT={args['MSCCLPP_COMMIT']}" in script


def test_sglang_closure_is_pinned():
    lines = [ln for ln in (REPO / "containers/sglang/constraints.txt").read_text().splitlines()
             if ln and not ln.startswith("#")]
    assert len(lines) > 100 and all(re.fullmatch(r"[A-Za-z0-9_.-]+==\S+", ln) for ln in lines), lines[:5]
    pins = dict(ln.split("==") for ln in lines)
    assert pins["sglang"] == SGLANG_PINS["SGLANG_VERSION"] and pins["torch"] == SGLANG_PINS["TORCH_VERSION"]
    assert "--constraint /tmp/constraints.txt" in SGLANG.read_text()


def _stage_of(text: str, name: str) -> str:
    """The lines of stage ``name`` (up to the next FROM)."""
    m = re.search(rf"^FROM\s+\S+\s+AS\s+{re.escape(name)}\n(.*?)(?=^FROM\s|\Z)", text, re.M | re.S)
    assert m, name
    return m.group(1)


def test_every_published_sglang_target_carries_the_kernel_toolchain_and_names_its_cache():
    """SGLang 0.5.23 and FlashInfer 0.7.2 compile kernels with nvcc on first use: every target is built on
    the `jit` stage, which copies the cuda-toolchain stage (the base's toolkit or the pinned wheels), puts its
    nvcc on PATH with CUDA_HOME, and keeps both libraries' caches under the directory its label names (where
    serve.kernel_cache mounts a host directory)."""
    from specsweep.serve.kernel_cache import KERNEL_CACHE_LABEL

    text = SGLANG.read_text()
    for target in ("stock", "mscclpp", "deepep", "fi-fusion"):
        assert re.search(rf"^FROM jit AS {target}$", text, re.M), target
    assert re.search(r"^FROM deps AS jit$", text, re.M)
    froms = [m.group(1) for m in re.finditer(r"^FROM\s+\S+\s+AS\s+(\S+)", text, re.M)]
    assert froms.index("cuda-toolchain") < froms.index("jit")  # COPY --from names an earlier stage
    jit = _stage_of(text, "jit")
    assert "COPY --from=cuda-toolchain /opt/cuda-toolchain/ /opt/cuda-toolchain/" in jit
    code = "\n".join(_logical_lines(jit))
    assert "CUDA_HOME=/opt/cuda-toolchain/cuda" in code
    assert "PATH=/opt/cuda-toolchain/cuda/bin:${PATH}" in code
    assert "SGLANG_JIT_CACHE_DIR=${KERNEL_CACHE_DIR}/sglang" in code
    assert "FLASHINFER_WORKSPACE_BASE=${KERNEL_CACHE_DIR}/flashinfer" in code
    assert f'{KERNEL_CACHE_LABEL}="${{KERNEL_CACHE_DIR}}"' in code
    assert 'io.specsweep.kernels.prebuilt="none"' in code
    assert "containers/sglang/kernel_record.py" in code and "/opt/cuda-toolchain/record.json" in code
    assert _arg_defaults(text)["KERNEL_CACHE_DIR"].startswith("/")
