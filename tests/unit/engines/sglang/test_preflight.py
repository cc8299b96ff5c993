"""Preflight of SGLang plans: static rules (fast) and SGLang 0.5.23's own parser (slow).

The parser tests build the pinned parser venv (envs/sglang-parser.txt) where
``specsweep.testing.parser_env`` says (one per requirements file) once; later
runs reuse it. They fail, never skip, when it cannot be built:
a preflight that silently does not run is worse than none.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from specsweep.contracts.plan import Plan
from specsweep.engines.sglang.engine import SGLangEngine
from specsweep.engines.sglang.preflight import ensure_parser_env, preflight_plans
from specsweep.engines.sglang.rules import check_plan
from specsweep.plan.resolve import LABEL_KEYS
from specsweep.testing.parser_env import assert_only_unmounted_weights, labelled_plans, preflight_config_set
from specsweep.testing.parser_env import parser_python as build_parser_python
from specsweep.testing.parser_env import wheel_site as site_of
from specsweep.testing.workflow import REPO

GPU_CONFIG = REPO / "config" / "kimi-k25-8gpu.yaml"
DUMMY_OVERLAY = REPO / "config" / "kimi-k25-8gpu-dummy.yaml"
CONFIG_SETS = {
    "weights": [GPU_CONFIG],
    "dummy": [GPU_CONFIG, DUMMY_OVERLAY],
}


#: (the merged config, the plans by name, their labels by name): ``labelled_plans``.
Labelled = tuple[dict, dict[str, Plan], dict[str, dict]]
#: A plan and its labels, as the rules take them.
Case = tuple[Plan, dict]


@pytest.fixture(scope="module")
def gpu_plans() -> Labelled:
    return labelled_plans([GPU_CONFIG])


def _case(plans: Labelled, name: str) -> Case:
    return plans[1][name], plans[2][name]


def _plan(gpu_plans: Labelled, base: str, **changes) -> Case:
    """Plan ``base`` and its labels with ``changes``: a label key changes the labels, any other the plan
    (server_args/env merged, None removes a key)."""
    plan, labels = gpu_plans[1][base], dict(gpu_plans[2][base])
    fields = {}
    for key, value in changes.items():
        if key in LABEL_KEYS:
            labels[key] = value
        elif key in ("server_args", "env"):
            fields[key] = {k: v for k, v in {**getattr(plan, key), **value}.items() if v is not None}
        else:
            fields[key] = value
    return plan.replace(**fields), labels


def _errors(case: Case) -> list[str]:
    return [f.message for f in check_plan(*case) if f.severity == "error"]


# --- static rules (fast) ----------------------------------------------------


def test_matrix_passes_static_rules(gpu_plans):
    for name in gpu_plans[1]:
        assert _errors(_case(gpu_plans, name)) == [], name


def test_matrix_covers_the_issue(gpu_plans):
    """Every optimisation of the plan has a configuration, and one combination uses an extends list."""
    config, plans, labels = gpu_plans
    variants = {v for own in labels.values() for v in own["variant"]}
    assert variants >= {"custom_allreduce", "mscclpp", "torch_symm_mem", "flashinfer_fusion", "deepep",
                        "pcie_ipc_allreduce", "nccl_env"}
    assert plans["nccl-tree-anyproto-anych-anybuf"].env["NCCL_ALGO"] == "allreduce:tree"  # the NCCL grid
    assert labels["nccl-tree-bare"]["expect"] == "failure"
    assert plans["no-custom-ar"].server_args["disable-custom-all-reduce"] is True
    assert any(isinstance(c.get("extends"), list) for c in config["configurations"].values())
    seed = plans["nccl-seed"].env
    assert {k: seed[k] for k in ("NCCL_ALGO", "NCCL_PROTO", "NCCL_P2P_LEVEL", "NCCL_MAX_NCHANNELS",
                                 "NCCL_BUFFSIZE", "NCCL_NTHREADS")} == {
        "NCCL_ALGO": "Ring", "NCCL_PROTO": "LL", "NCCL_P2P_LEVEL": "SYS", "NCCL_MAX_NCHANNELS": "16",
        "NCCL_BUFFSIZE": "16777216", "NCCL_NTHREADS": "512"}


def test_dummy_overlay_is_weight_free():
    _config, plans, _labels = labelled_plans(CONFIG_SETS["dummy"])
    for name, plan in plans.items():
        sa = plan.server_args
        assert sa["load-format"] == "dummy", name
        assert sa["skip-tokenizer-init"] is True, name
        assert plan.env["SGLANG_SIMULATE_ACC_LEN"] == "2.0", name
        assert plan.workload["endpoint"] == "generate", name  # input_ids requests
        if sa.get("speculative-algorithm"):
            assert sa["speculative-draft-load-format"] == "dummy", name
            assert sa["speculative-draft-model-path"].startswith("/specsweep-models/"), name


def test_removed_flag_names_config_and_replacement(gpu_plans):
    errors = _errors(_plan(gpu_plans, "eagle3", server_args={"cuda-graph-max-bs": 8}))
    assert any("configurations.eagle3.server_args.cuda-graph-max-bs" in e and "--cuda-graph-max-bs-decode" in e
               for e in errors), errors


def test_fusion_on_sm120_needs_patched_image(gpu_plans):
    plan = _plan(gpu_plans, "fi-fusion", image="sglang")
    errors = _errors(plan)
    assert any("configurations.fi-fusion.server_args.flashinfer-allreduce-fusion-backend" in e and "sm120" in e
               for e in errors), errors
    assert _errors(_plan(gpu_plans, "fi-fusion")) == []
    assert _errors(_plan(gpu_plans, "fi-fusion", image="sglang", gpu_arch="sm90")) == []
    # A patched image recognised by its target, whatever its name.
    patched = {"my-img": {"target": "fi-fusion"}}
    findings = check_plan(*_plan(gpu_plans, "fi-fusion", image="my-img"), patched)
    assert [f for f in findings if f.severity == "error"] == []


def test_mscclpp_tp_size(gpu_plans):
    errors = _errors(_plan(gpu_plans, "mscclpp", server_args={"tp-size": 6}))
    assert any("configurations.mscclpp.server_args.enable-mscclpp" in e and "6" in e for e in errors), errors


def test_deepep_normal_without_nvlink(gpu_plans):
    for mode in ("normal", "auto", None):
        errors = _errors(_plan(gpu_plans, "deepep", server_args={"deepep-mode": mode}))
        assert any("configurations.deepep.server_args.deepep-mode" in e for e in errors), (mode, errors)
    assert _errors(_plan(gpu_plans, "deepep", server_args={"deepep-mode": "normal"}, nvlink=True)) == []


def test_ll128_on_pcie(gpu_plans):
    for value in ("LL128", "Simple,LL128", "allreduce:LL128"):
        errors = _errors(_plan(gpu_plans, "nccl-anyalgo-ll-anych-anybuf", env={"NCCL_PROTO": value}))
        assert any("configurations.nccl-anyalgo-ll-anych-anybuf.env.NCCL_PROTO" in e for e in errors), (value, errors)
    assert _errors(_plan(gpu_plans, "nccl-anyalgo-ll-anych-anybuf", env={"NCCL_PROTO": "^LL128"})) == []


def test_bare_tree_warns_unless_expected_failure(gpu_plans):
    warn = [f for f in check_plan(*_plan(gpu_plans, "nccl-tree-bare", expect="ok")) if f.rule == "nccl-bare-tree"]
    assert warn and "allreduce:tree" in warn[0].message
    assert [f for f in check_plan(*_case(gpu_plans, "nccl-tree-bare")) if f.rule == "nccl-bare-tree"] == []


def test_eagle_numbers(gpu_plans):
    errors = _errors(_plan(gpu_plans, "eagle3", server_args={"speculative-num-steps": None}))
    assert any("configurations.eagle3.server_args.speculative-num-steps" in e for e in errors), errors
    errors = _errors(_plan(gpu_plans, "eagle3", server_args={"speculative-num-draft-tokens": 6}))
    assert any("configurations.eagle3.server_args.speculative-num-draft-tokens" in e and "= 4" in e
               for e in errors), errors
    # topk > 1 (tree drafts): any draft-token count is SGLang's to judge.
    assert _errors(_plan(gpu_plans, "eagle3", server_args={"speculative-eagle-topk": 4,
                                                           "speculative-num-draft-tokens": 8})) == []


def _findings(case: Case, rule: str) -> list:
    return [f for f in check_plan(*case) if f.rule == rule]


def test_deepep_low_latency_needs_rdma_nics(gpu_plans):
    """DeepEP low-latency goes over RDMA even within one node (deepseek-ai/DeepEP issue 164)."""
    unknown = _findings(_plan(gpu_plans, "deepep"), "deepep-rdma")
    assert [f.severity for f in unknown] == ["warning"] and "issue 164" in unknown[0].message
    no_rdma = _findings(_plan(gpu_plans, "deepep", rdma=False), "deepep-rdma")
    assert [f.severity for f in no_rdma] == ["error"]
    assert "configurations.deepep.server_args.deepep-mode" in no_rdma[0].message
    assert "no DeepEP mode can run here" in no_rdma[0].message  # nvlink: false too
    assert _findings(_plan(gpu_plans, "deepep", rdma=True), "deepep-rdma") == []
    assert _findings(_plan(gpu_plans, "eagle3", rdma=False), "deepep-rdma") == []


def test_known_failure_names_its_signature(gpu_plans):
    tree = _case(gpu_plans, "nccl-tree-bare")
    assert tree[1]["expect"] == "failure"
    assert tree[1]["expect_signature"] == ["nccl_no_algorithm", "cuda_graph_capture_failed"]
    assert _errors(tree) == []
    assert any("needs the failure it is known for" in e
               for e in _errors(_plan(gpu_plans, "nccl-tree-bare", expect_signature=[])))
    assert any("unknown failure signature 'oom'" in e
               for e in _errors(_plan(gpu_plans, "nccl-tree-bare", expect_signature=["oom"])))
    assert any("expect is not failure" in e
               for e in _errors(_plan(gpu_plans, "eagle3", expect_signature="nccl_no_algorithm")))


@pytest.fixture(scope="module")
def dummy_plans() -> Labelled:
    return labelled_plans(CONFIG_SETS["dummy"])


def test_dummy_matrix_passes_static_rules(dummy_plans):
    for name in dummy_plans[1]:
        found = check_plan(*_case(dummy_plans, name), base=REPO)
        assert [f.message for f in found if f.severity == "error"] == [], name


def test_deepep_cannot_run_compressed_tensors_experts(dummy_plans):
    """layers/moe/ep_moe/layer.py:297-301 (and :167-177): DeepEP's MoE layer runs only FP8/W4AFP8 experts;
    the rule reads the model's config.json (Kimi-K2.5's text config: compressed-tensors INT4 experts)."""
    from specsweep.engines.sglang.deepep import model_quantization

    deepep, labels = _case(dummy_plans, "deepep")
    assert model_quantization(deepep, REPO)[0] == "compressed-tensors"
    # The matrix labels it an expected failure with its own signatures (the assert, or NVSHMEM's error
    # without RDMA first): nothing to refuse.
    assert labels["expect"] == "failure" and labels["expect_signature"] == ["deepep_quantization", "deepep_rdma"]
    assert [f for f in check_plan(deepep, labels, base=REPO) if f.rule == "deepep-quantization"] == []
    # Labelled as expected to run (or to fail for another reason): refused, naming the key and the cause.
    for other in ({"expect": "ok", "expect_signature": []},
                  {"expect": "failure", "expect_signature": ["cuda_graph_capture_failed"]},
                  {"expect": "failure", "expect_signature": ["deepep_quantization"]}):  # rdma not known: both
        found = [f for f in check_plan(deepep, {**labels, **other}, base=REPO) if f.rule == "deepep-quantization"]
        assert [f.severity for f in found] == ["error"], other
        assert found[0].message.startswith("configurations.deepep.server_args.moe-a2a-backend: ")
        assert "compressed-tensors" in found[0].message and "layer.py:167-177,297-301" in found[0].message
    # A plan alone (no labels, as the preflight job reads it): a warning that names the label.
    found = [f for f in check_plan(deepep, None, base=REPO) if f.rule == "deepep-quantization"]
    assert [f.severity for f in found] == ["warning"]
    assert "expect_signature: [deepep_quantization, deepep_rdma]" in found[0].message
    # On a host known to have RDMA, NVSHMEM comes up: the assert alone is the expected failure.
    rdma = check_plan(deepep.replace(rdma=True), {**labels, "expect_signature": ["deepep_quantization"]}, base=REPO)
    assert [f for f in rdma if f.rule == "deepep-quantization"] == []
    # An unquantized (or FP8) model is not this rule's business.
    fp8 = deepep.replace(server_args={**deepep.server_args, "quantization": "fp8"})
    assert model_quantization(fp8, REPO)[0] == "fp8"
    assert [f for f in check_plan(fp8, None, base=REPO) if f.rule == "deepep-quantization"] == []


def test_deepep_quantization_is_read_from_text_config_as_sglang_does(gpu_plans):
    """Kimi-K2.5's real config.json keeps quantization_config under text_config, and SGLang copies it up
    (sglang/srt/configs/kimi_k25.py:157-159): the DeepEP refusal reads it there too."""
    from specsweep.engines.sglang.deepep import model_quantization

    model = REPO / "tests" / "fixtures" / "models" / "kimi-k25-multimodal"
    assert "quantization_config" not in json.loads((model / "config.json").read_text())
    local, labels = _plan(gpu_plans, "deepep", runtime="local", server_args={"model-path": str(model)},
                          expect="ok", expect_signature=[])
    method, where = model_quantization(local, REPO)
    assert method == "compressed-tensors" and where.endswith("config.json text_config")
    found = [f for f in check_plan(local, labels, base=REPO) if f.rule == "deepep-quantization"]
    assert [f.severity for f in found] == ["error"] and "text_config" in found[0].message


def test_env_booleans_are_read_as_sglang_reads_them(gpu_plans):
    """EnvBool (sglang/srt/environ.py:143-150) takes "true", "1", "yes", "y" as on and "false", "0", "no", "n"
    as off, lower-cased; on anything else EnvField.get (:67-83) warns and uses the default: refused with
    the config, saying so (it does not raise)."""
    from specsweep.engines.sglang.environ import env_bool
    from specsweep.plan.envcheck import env_problems

    assert [env_bool(v) for v in ("1", "true", "True", "yes", "Y")] == [True] * 5
    assert [env_bool(v) for v in ("0", "false", "no", "N")] == [False] * 4
    assert env_bool("on") is None and env_bool(" 1") is None  # nothing stripped
    for on in ("yes", "y"):
        plan = _plan(gpu_plans, "pcie-ipc", server_args={"tp-size": 3}, gpus=3,
                     env={"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": on})
        assert [f.severity for f in _findings(plan, "pcie-ipc-tp")] == ["warning"], on
    problems = env_problems({"configurations": {"pcie-ipc": {"env": {"SGLANG_ENABLE_PCIE_IPC_ALLREDUCE": "on"}}}})
    assert problems == [
        'configurations.pcie-ipc.env.SGLANG_ENABLE_PCIE_IPC_ALLREDUCE: "on" is not a valid boolean value: SGLang '
        "0.5.23 warns and uses the default False instead (sglang/srt/environ.py:67-83; EnvBool at "
        "sglang/srt/environ.py:1539, parsed at sglang/srt/environ.py:143-150); allowed: true, 1, yes, y (on) or "
        "false, 0, no, n (off), in any case"]


def test_gpus_must_hold_every_rank(gpu_plans):
    plan = _plan(gpu_plans, "eagle3", gpus=4)
    assert [f.message for f in _findings(plan, "gpus-world-size")] == [
        "configurations.eagle3.gpus: 4, but tp-size 8 needs 8 GPUs (one per rank); set gpus: 8, or a tp-size that fits"]
    assert [f.severity for f in _findings(_plan(gpu_plans, "eagle3", gpus=16), "gpus-world-size")] == ["warning"]
    assert _findings(_case(gpu_plans, "eagle3"), "gpus-world-size") == []


def test_labels_check_reports_every_static_finding(gpu_plans):
    """When the workflow starts (snakemake -n included) every SGLang-free rule runs, not only what the
    labels add: EAGLE without a draft model stops there, before any parser environment is built."""
    plan, _labels = _plan(gpu_plans, "eagle3", server_args={"speculative-draft-model-path": None})
    result = SGLangEngine().check_labels(plan, {"expect": "ok", "variant": []})
    assert any(e.startswith("configurations.eagle3.server_args.speculative-draft-model-path: ") for e in result.errors)


def test_unknown_variant(gpu_plans):
    errors = _errors(_plan(gpu_plans, "eagle3", variant=["nvls"]))
    assert any("configurations.eagle3.variant" in e and "nvls" in e for e in errors), errors


@pytest.mark.slow
def test_engine_preflight_runs_the_rules_and_the_parser(gpu_plans, parser_python):
    engine = SGLangEngine()
    _config, dummy, labels = labelled_plans(CONFIG_SETS["dummy"])
    good = engine.preflight(dummy["eagle3"], parser_python, labels=labels["eagle3"])
    assert good.errors == [] and good.checked_with.startswith("sglang 0.5.23")
    assert [x["role"] for x in good.loaded] == ["model", "draft"]
    assert engine.preflight(_plan(gpu_plans, "mscclpp", server_args={"tp-size": 2})[0], parser_python).errors
    with pytest.raises(ValueError, match="parser"):
        engine.preflight(gpu_plans[1]["eagle3"])


def test_parser_env_reused_when_marker_matches(tmp_path):
    """Keyed on the requirements' sha256: a matching venv is returned without pip."""
    import hashlib

    req = tmp_path / "req.txt"
    req.write_text("sglang==0.5.23\n")
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "bin" / "python").write_text("")
    (venv / ".specsweep-requirements.sha256").write_text(hashlib.sha256(req.read_bytes()).hexdigest() + "\n")
    assert ensure_parser_env(venv, req) == str(venv.resolve() / "bin" / "python")


def test_rebuild_keeps_other_files(tmp_path):
    """The workflow keeps ready.json and its job log in the venv directory; a rebuild must not delete them."""
    from specsweep.engines.sglang.preflight import _clear_venv

    venv = tmp_path / "venv"
    for d in ("bin", "lib"):
        (venv / d).mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("")
    (venv / "ready.json").write_text("{}")
    (venv / "make_parser_env.log").write_text("")
    _clear_venv(venv)
    assert sorted(p.name for p in venv.iterdir()) == ["make_parser_env.log", "ready.json"]


# --- SGLang 0.5.23's own parser (slow, runs in CI) ---------------------------


@pytest.fixture(scope="session")
def parser_python() -> str:
    # No try/except: a venv that cannot be built fails the tests that need it.
    return build_parser_python()


@pytest.mark.slow
@pytest.mark.parametrize("config_set", sorted(CONFIG_SETS))
def test_every_configuration_passes_sglang_parser(parser_python, config_set):
    plans, results, bad = preflight_config_set(CONFIG_SETS[config_set], parser_python)
    assert set(results) == set(plans)
    if config_set == "weights" and not Path("/models").exists():
        assert_only_unmounted_weights(bad)
        assert set(bad) == set(plans)
    else:
        assert bad == {}
    assert {r["sglang_version"] for r in results.values()} == {"0.5.23"}
    assert results["eagle3"]["argv"][:3] == ["python3", "-m", "sglang.launch_server"]


@pytest.mark.slow
def test_sglang_parser_rejections_name_config_and_flag(parser_python, gpu_plans):
    cases = {
        # typo'd flag: argparse alone would accept this prefix of --enable-mscclpp
        "typo": (_plan(gpu_plans, "mscclpp", name="typo", server_args={"enable-mscclpp": None, "enable-msccl": True}),
                 "--enable-msccl"),
        "typo2": (_plan(gpu_plans, "eagle3", name="typo2", server_args={"speculative-num-stepz": 3}),
                  "--speculative-num-stepz"),
        # removed flag (SGLang's parser says "ambiguous option"; the rule names the replacement)
        "removed": (_plan(gpu_plans, "eagle3", name="removed", server_args={"cuda-graph-max-bs": 8}),
                    "cuda-graph-max-bs"),
        # a value outside SGLang's choices
        "choice": (_plan(gpu_plans, "fi-fusion", name="choice",
                         server_args={"flashinfer-allreduce-fusion-backend": "nccl"}),
                   "--flashinfer-allreduce-fusion-backend"),
        # unsupported combination: fusion on SM120 with the stock image
        "combo": (_plan(gpu_plans, "fi-fusion", name="combo", image="sglang"),
                  "flashinfer-allreduce-fusion-backend"),
    }
    plans = [plan.replace(argv=()) for (plan, _labels), _flag in cases.values()]  # argv rebuilt from server_args
    results = preflight_plans(plans, parser_python)
    for name, (_plan_, flag) in cases.items():
        result = results[name]
        assert not result["ok"], name
        assert any(f"configurations.{name}" in e and flag in e for e in result["errors"]), (name, result["errors"])
    assert any("--cuda-graph-max-bs-decode" in e for e in results["removed"]["errors"])
    assert any("invalid choice" in e for e in results["choice"]["errors"])


@pytest.mark.slow
def test_parser_env_is_idempotent(parser_python):
    assert build_parser_python() == parser_python


def _fusion_backend_quotes() -> dict[str, str]:
    """The fi-fusion entry's quotes of SGLang's help, one line per backend: ``#   '<choice>': <help text>``."""
    quotes = {}
    for line in GPU_CONFIG.read_text().splitlines():
        m = re.match(r"^\s*#\s+'(?P<choice>[a-z]+)': (?P<text>.+)$", line)
        if m:
            quotes[m["choice"]] = f"'{m['choice']}': {m['text']}"
    return quotes


def test_kimi_fusion_comment_quotes_sglang_for_every_backend():
    """What the config says about trtllm/mnnvl/cutedsl/auto is SGLang's own help text (checked against the
    wheel below), not a paraphrase: mnnvl is not MNNVL-fabric-only (arg_groups/fields/exec_.py:770-790)."""
    assert sorted(_fusion_backend_quotes()) == ["auto", "cutedsl", "mnnvl", "trtllm"]


@pytest.fixture(scope="module")
def wheel_site(parser_python) -> Path:
    return site_of(parser_python)


def _fusion_backend_help(wheel_site: Path) -> tuple[list[str], str]:
    """(choices, help) of ``flashinfer_allreduce_fusion_backend`` in the wheel's exec_.py."""
    import ast

    tree = ast.parse((wheel_site / "sglang/srt/arg_groups/fields/exec_.py").read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.AnnAssign) and getattr(node.target, "id", "") == "flashinfer_allreduce_fusion_backend":
            literal = next(n for n in ast.walk(node.annotation) if isinstance(n, ast.Subscript)
                           and getattr(n.value, "id", "") == "Literal")
            choices = [e.value for e in literal.slice.elts]
            call = next(n for n in ast.walk(node.annotation) if isinstance(n, ast.Call))
            help_text = next(k.value.value for k in call.keywords if k.arg == "help")
            return choices, help_text
    raise AssertionError("flashinfer_allreduce_fusion_backend not in exec_.py")


@pytest.mark.slow
def test_kimi_fusion_comment_matches_the_wheel(wheel_site):
    choices, help_text = _fusion_backend_help(wheel_site)
    assert sorted(choices) == sorted(_fusion_backend_quotes())
    for choice, quote in _fusion_backend_quotes().items():
        assert quote in help_text, choice


@pytest.mark.slow
def test_env_bool_words_match_the_wheel(wheel_site):
    """environ.BOOL_ON / BOOL_OFF are EnvBool.parse's lists (sglang/srt/environ.py:143-150)."""
    from specsweep.engines.sglang.environ import BOOL_OFF, BOOL_ON

    lines = (wheel_site / "sglang/srt/environ.py").read_text().splitlines()
    assert lines[142].startswith("class EnvBool(")  # line 143
    assert lines[145].strip() == f"if value in {list(BOOL_ON)!r}:".replace("'", '"')  # line 146
    assert lines[147].strip() == f"if value in {list(BOOL_OFF)!r}:".replace("'", '"')  # line 148


def _outcome_rows() -> list[tuple[list[str], str, str]]:
    """(configurations, preflight, after a run) of docs/sglang.md's expected-outcomes table."""
    text = (REPO / "docs" / "sglang.md").read_text()
    table = text[text.index("## Expected outcomes on "):]
    rows = []
    for line in table.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and cells[0].startswith("`"):
            rows.append((re.findall(r"`([a-z0-9-]+)`", cells[0]), cells[1], cells[2]))
    return rows


def test_docs_outcome_table_matches_the_rules(dummy_plans):
    """Each row's preflight column says what the rules find for its configurations: exactly the rules it names
    as "warning `rule`" (a rule named otherwise is one that would refuse it elsewhere, and must not fire
    here), and its run column names only failure signatures that exist."""
    from specsweep.engines.sglang.logcheck import failure_names

    rows = _outcome_rows()
    assert len(rows) >= 9
    for names, pre, after in rows:
        for name in names:
            found = {f.rule for f in check_plan(*_case(dummy_plans, name), base=REPO)}
            named = set(re.findall(r"`([a-z0-9]+(?:-[a-z0-9]+)+)`", pre)) - set(names) - {"sglang-fi-fusion"}
            warned = {r for r in named if f"warning `{r}`" in pre}
            assert found == warned, (name, found, pre)
        for signature in re.findall(r"`([a-z_]+)`", after):
            if "_" in signature:
                assert signature in failure_names() or signature in dummy_plans[2][names[0]]["variant"] \
                    or signature == "nccl_env", signature


@pytest.mark.slow
def test_kimi_k25_config_copies_text_config_quantization(wheel_site):
    """The line model_quantization's text_config reading relies on (TEXT_CONFIG_QUANT_TYPES)."""
    from specsweep.engines.sglang.deepep import TEXT_CONFIG_QUANT_TYPES

    lines = (wheel_site / "sglang/srt/configs/kimi_k25.py").read_text().splitlines()
    assert lines[157].strip() == 'if getattr(self.text_config, "quantization_config", None) is not None:'
    assert lines[158].strip() == "self.quantization_config = self.text_config.quantization_config"
    assert 'model_type = "kimi_k25"' in "\n".join(lines) and "kimi_k25" in TEXT_CONFIG_QUANT_TYPES
