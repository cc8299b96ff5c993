"""The variant registry (``engines.variants``): every list a stage reads agrees with it, and a new variant is
its entry, its image target and its test.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import yaml

from specsweep.analysis import kernels
from specsweep.contracts.variants import Variant, requested_variants
from specsweep.engines import reference
from specsweep.engines.sglang import logcheck, rules
from specsweep.engines.variants import (
    VARIANTS,
    allreduce_precedence,
    image_targets,
    implementations,
    known_variants,
    log_signatures,
    packages,
    variants_of,
)
from specsweep.refengine.cli import BACKENDS
from specsweep.serve import provenance
from specsweep.testing.workflow import REPO

DOCKERFILE = REPO / "containers" / "sglang" / "Dockerfile"
#: The stage of the SGLang Dockerfile that every variant image builds on: SGLang as released.
STOCK = "stock"


def variant_stages(dockerfile: str) -> dict[str, str]:
    """Each stage of a Dockerfile that labels its image with a variant (``io.specsweep.variant``): stage -> label."""
    out: dict[str, str] = {}
    for stage in re.split(r"(?m)^FROM ", dockerfile)[1:]:
        name = re.match(r"\S+ AS (\S+)", stage)
        label = re.search(r'io\.specsweep\.variant="([^"]+)"', stage)
        if name and label:
            out[name.group(1)] = label.group(1)
    return out


def test_each_entry_is_whole_and_its_lines_and_kernels_are_its_own():
    assert VARIANTS and all(isinstance(v, Variant) and v.name == name for name, v in VARIANTS.items())
    for v in VARIANTS.values():
        assert v.engine in ("sglang", "reference"), v.name
        assert all(s.variant == v.name and s.kind in ("active", "fallback", "note") for s in v.log), v.name
        if v.implementation is not None:
            assert all(p.impl == v.implementation.id for p in v.implementation.kernels), v.name


def test_the_engines_know_the_registry_s_names():
    assert rules.KNOWN_VARIANTS == known_variants("sglang") == frozenset(variants_of("sglang"))
    assert reference.VARIANTS == known_variants("reference") == {f"all-reduce:{b}" for b in BACKENDS}
    assert set(VARIANTS) == known_variants("sglang") | known_variants("reference")


def test_log_check_reads_the_entries_lines_and_precedence():
    # the variants' lines (NVSHMEM's failure lines are the log check's own: why a server failed)
    every = tuple(s for s in logcheck.SIGNATURES + logcheck.NOTES + logcheck.NVSHMEM_SIGNATURES if s.kind != "failure")
    assert sorted(every, key=id) == sorted(log_signatures("sglang"), key=id)
    assert {s.variant for s in every} <= rules.KNOWN_VARIANTS
    assert all(s.library == "nvshmem" for s in logcheck.NVSHMEM_SIGNATURES)
    assert logcheck.ALLREDUCE_PRECEDENCE == allreduce_precedence("sglang")
    ranked = sorted((v for v in variants_of("sglang").values() if v.precedence is not None),
                    key=lambda v: v.precedence)
    assert list(logcheck.ALLREDUCE_PRECEDENCE) == [v.name for v in ranked]
    assert len({v.precedence for v in ranked}) == len(ranked)  # no two share a place


def test_trace_split_reads_the_entries_implementations():
    impls = implementations()
    assert set(kernels.IMPLEMENTATIONS) == set(impls) | {"p2p_copy"}
    for impl_id, (impl, names) in impls.items():
        assert kernels.IMPLEMENTATIONS[impl_id] == {"label": impl.label, "variants": names}
    assert kernels.PATTERNS == tuple(p for impl, _ in impls.values() for p in impl.kernels)
    for v in VARIANTS.values():
        assert v.implementation is not None, v.name
        assert v.name in kernels.IMPLEMENTATIONS[v.implementation.id]["variants"]
    # the reference engine's trace ranges name a backend: each maps to its variant's implementation
    assert kernels.REFENGINE_IMPL == {b: VARIANTS[f"all-reduce:{b}"].implementation.id for b in BACKENDS}


def test_provenance_records_the_entries_packages():
    labels: dict[str, tuple[str, ...]] = {}
    for v in VARIANTS.values():
        for label, names in v.packages.items():
            assert labels.setdefault(label, names) == names, f"{label}: two entries name other distributions"
    assert packages() == labels
    # the probe's own list (it imports nothing of the package) never contradicts an entry
    for label, names in provenance.PACKAGES.items():
        assert labels.get(label, names) == names, label
    assert {"flashinfer", "mscclpp", "deep_ep", "nccl", "sglang-kernel"} <= set(labels)


def test_images_carry_the_entries_targets():
    stages = variant_stages(DOCKERFILE.read_text())
    assert all(stage == label for stage, label in stages.items())  # the label is the stage's name
    assert set(stages) == {STOCK, *image_targets("sglang").values()}
    assert image_targets("reference") == {}
    assert rules.FUSION_TARGET == VARIANTS["flashinfer_fusion"].image_target
    # the GPU configuration's images are built from these stages
    config = yaml.safe_load((REPO / "config" / "kimi-k25-8gpu.yaml").read_text())
    targets = {spec["target"] for spec in config["images"].values()}
    assert targets == set(stages)


def test_every_variant_a_config_names_is_an_entry():
    """(Which engine may run it is the engines' plan-time check, ``check_labels``.)"""
    seen = 0
    for path in [REPO / "config.yaml", *sorted((REPO / "config").glob("*.yaml"))]:
        config = yaml.safe_load(path.read_text()) or {}
        for name, entry in (config.get("configurations") or {}).items():
            for variant in requested_variants(entry or {}):
                assert variant in VARIANTS, f"{path.name}: configurations.{name}.variant: {variant}"
                seen += 1
    assert seen > 10


# ------------------------------------------------------------------ a new variant: its entry, target and test

#: The new variant's entry, as a new variant's author writes it (a section of engines/variants.py).
FAKE_ENTRY = '''
# ------------------------------------------------------------------ fake_ar (a test's variant)

FAKE_AR = Implementation("fake_ar", "fake all-reduce", (
    _p("fake_ar", "all_reduce", r"\\bfakeAllReduceKernel\\b", "the test's own trace"),
))


def _fake_ar_rules(plan: Plan, labels: Labels, images: Mapping[str, Any] | None) -> list[Finding]:
    if tp_size(plan.server_args) < 2:
        return [Finding("warning", "fake-ar-tp",
                        f"configurations.{plan.name}.server_args.tp-size: fake_ar needs tp-size 2 or more")]
    return []


_FAKE_AR = Variant(
    "fake_ar", "sglang", FAKE_AR,
    log=(
        _log("fake_ar", "active", r"Fake all-reduce on \\(world=\\d+\\)", "fake.py:1", "Fake all-reduce on", "info"),
        _log("fake_ar", "fallback", r"Fake all-reduce is off", "fake.py:2", "Fake all-reduce is off"),
    ),
    precedence=5,  # before FlashInfer's fusion: it takes the all-reduce when both are on
    packages={"fake": ("fake-ar",)},
    rules=(_fake_ar_rules,),
    image_target="fake-ar",
)

'''

#: Its image target, a stage of the engine's Dockerfile.
FAKE_STAGE = '''
FROM deps AS fake-ar
LABEL io.specsweep.variant="fake-ar"
'''

#: What runs in the copy with the new variant: plan rules, log evidence, trace split, provenance, report.
FAKE_RUN = '''
import json, sys
from pathlib import Path

from specsweep.analysis.profiling import trace_variant_evidence
from specsweep.analysis.summary import build_summary
from specsweep.analysis.trace import analyze_traces
from specsweep.contracts.plan import Plan
from specsweep.engines.registry import get_engine
from specsweep.engines.variants import image_targets, packages
from specsweep.testing.doubles import plan_dict
from specsweep.testing.reports import OK, WORKLOAD, render_summaries, sequential_records

out = {}
sglang = get_engine("sglang")
plan = {"name": "fake", "engine": "sglang", "runtime": "docker", "image": "sglang-fake",
        "server_args": {"tp-size": 1}, "env": {}, "workload": WORKLOAD, "gpus": 1}
typed = Plan.from_dict(plan_dict(**plan))
checked = sglang.check_labels(typed, {"variant": "fake_ar"})
out["errors"], out["warnings"] = checked.errors, checked.warnings
out["unknown"] = sglang.check_labels(typed, {"variant": "no_such_variant"}).errors
out["on"] = sglang.variant_evidence("[TP0] Fake all-reduce on (world=2)", typed, {"variant": ["fake_ar"]})
off_log = "[TP0] Fake all-reduce is off"
out["off"] = sglang.variant_evidence(off_log, typed, {"variant": ["fake_ar"]})
both = ("[TP0] Fake all-reduce on (world=8)\\n"
        "[TP0] FlashInfer AllReduce Fusion enabled and workspace initialized: backend=trtllm")
out["both"] = sglang.variant_evidence(both, typed, {"variant": ["fake_ar", "flashinfer_fusion"]})
trace = json.loads(Path(sys.argv[1]).read_text())
for e in trace["traceEvents"]:
    if e.get("name", "").startswith("ncclDevKernel_AllReduce"):
        e["name"] = "void fakeAllReduceKernel<__nv_bfloat16>(void*)"
Path("fake-TP-0.trace.json").write_text(json.dumps(trace))
analysis = analyze_traces(["fake-TP-0.trace.json"])
out["trace"] = trace_variant_evidence(analysis, ["fake_ar"])
out["packages"] = {k: list(v) for k, v in packages().items()}
out["targets"] = image_targets("sglang")
base = build_summary({**plan, "name": "base", "server_args": {}}, None, OK, [],
                     sequential_records("b", 12.0, 1, False, 1, 0.02), None)
fake = build_summary(plan, None, OK, [], sequential_records("f", 12.0, 1, False, 2, 0.02), out["off"])
render_summaries([base, fake], "base", Path("summary.csv"), Path("report.md"), Path("plots"))
out["report"] = Path("report.md").read_text()
print(json.dumps(out))
'''


def test_a_new_variant_is_its_entry_its_image_target_and_its_test(tmp_path: Path):
    """A copy of the package and the engine's Dockerfile, with a new variant ``fake_ar`` added the way a new
    one is added: a section of ``engines/variants.py`` and its name in ``VARIANTS``, and a Dockerfile stage.
    No other file of the copy changes; the unchanged rest then runs it through the plan rules, the log
    evidence (its lines and its place in the all-reduce dispatch), the trace split, the provenance's
    packages and the report."""
    copy = tmp_path / "repo"
    shutil.copytree(REPO / "specsweep", copy / "specsweep", ignore=shutil.ignore_patterns("__pycache__"))
    (copy / "containers" / "sglang").mkdir(parents=True)
    shutil.copy(DOCKERFILE, copy / "containers" / "sglang" / "Dockerfile")
    registry = copy / "specsweep" / "engines" / "variants.py"
    text = registry.read_text()
    marker = "# ------------------------------------------------------------------ the registry"
    assert text.count(marker) == 1 and text.count("    *_REFERENCE,\n)}") == 1
    registry.write_text(text.replace(marker, FAKE_ENTRY.lstrip("\n") + marker)
                        .replace("    *_REFERENCE,\n)}", "    *_REFERENCE,\n    _FAKE_AR,\n)}"))
    with (copy / "containers" / "sglang" / "Dockerfile").open("a") as f:
        f.write(FAKE_STAGE)
    changed = [str(p.relative_to(copy)) for p in sorted(copy.rglob("*")) if p.is_file()
               and (REPO / p.relative_to(copy)).read_bytes() != p.read_bytes()]
    assert changed == ["containers/sglang/Dockerfile", "specsweep/engines/variants.py"]

    work = tmp_path / "work"
    work.mkdir()
    script = work / "run.py"
    script.write_text(textwrap.dedent(FAKE_RUN))
    fixture = REPO / "tests" / "fixtures" / "traces" / "kernels" / "nccl-TP-0.trace.json"
    proc = subprocess.run([sys.executable, str(script), str(fixture)], cwd=work, capture_output=True, text=True,
                          timeout=300, env={"PYTHONPATH": str(copy), "PATH": "/usr/bin:/bin", "MPLBACKEND": "Agg"})
    assert proc.returncode == 0, proc.stderr[-3000:]
    out = json.loads(proc.stdout)

    # plan rules: a known name, and its own rule runs
    assert out["errors"] == []
    assert any("fake_ar needs tp-size 2 or more" in w for w in out["warnings"]), out["warnings"]
    assert any("'fake_ar'" in e for e in out["unknown"]), out["unknown"]
    # log evidence: its lines, and its place before FlashInfer's fusion in the dispatch
    assert out["on"]["active"] == ["fake_ar"] and out["on"]["fell_back"] == []
    assert out["off"]["fell_back"] == [{"variant": "fake_ar", "line": "[TP0] Fake all-reduce is off"}]
    assert out["both"]["active"] == ["fake_ar"]
    assert [s["variant"] + ">" + s["by"] for s in out["both"]["shadowed"]] == ["flashinfer_fusion>fake_ar"]
    # trace split: its kernels are its implementation's calls
    assert out["trace"]["proven"] == ["fake_ar"] and out["trace"]["fell_back"] == []
    # provenance and image
    assert out["packages"]["fake"] == ["fake-ar"]
    assert out["targets"]["fake_ar"] == "fake-ar"
    assert set(variant_stages((copy / "containers" / "sglang" / "Dockerfile").read_text())) == \
        {STOCK, *out["targets"].values()}
    # the report: its configuration fell back, and says which variant and the line that proves it
    assert "### fake: fallback" in out["report"] and "fake_ar" in out["report"]
    assert "Fake all-reduce is off" in out["report"]
