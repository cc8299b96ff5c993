"""What the run profiles promise, read from the files themselves."""

from __future__ import annotations

import re

import yaml

from specsweep.testing.workflow import REPO


def profile(name: str) -> dict:
    return yaml.safe_load((REPO / "profiles" / name / "config.yaml").read_text())


def test_the_slurm_profile_uses_the_executor_and_squeue_without_accounting():
    slurm = profile("slurm")
    assert slurm["executor"] == "slurm"
    assert slurm["slurm-status-command"] == "squeue"


def test_no_global_server_resource_serialises_the_cluster():
    assert "server" not in (profile("slurm").get("resources") or {})
    assert profile("default")["resources"]["server"] == 1  # the one-host profile keeps it


def test_the_server_job_gets_a_node_of_its_own_and_the_site_knobs():
    server = profile("slurm")["set-resources"]["benchmark_server"]
    assert "--exclusive" in server["slurm_extra"]
    assert {"runtime", "mem_mb", "cpus_per_task"} <= set(server)
    defaults = profile("slurm")["default-resources"]
    assert {"slurm_partition", "runtime", "mem_mb", "cpus_per_task"} <= set(defaults)


def test_rerun_triggers_are_the_same_as_the_local_profile():
    assert profile("slurm")["rerun-triggers"] == profile("default")["rerun-triggers"]


def test_only_the_server_jobs_leave_the_submit_host():
    """Every rule but those that launch servers (benchmark_server, and the burn-in's unmeasured launches)
    is a localrule (tests/slurm checks what Slurm really ran)."""
    rules, remote = [], []
    for smk in sorted((REPO / "rules").glob("*.smk")):
        for block in re.split(r"\n(?=rule )", smk.read_text()):
            head = re.search(r"^rule (\w+):", block, re.M)
            if head:
                rules.append(head[1])
                if not re.search(r"^\s+localrule: True$", block, re.M):
                    remote.append(head[1])
    assert {"resolve_plan", "build_image", "preflight_config", "summarize_config", "render_report"} <= set(rules)
    assert sorted(remote) == ["benchmark_server", "burn_in_host"]


def test_a_side_by_side_round_of_17_gpu_launches_fits_the_default_profiles_gpu_budget():
    # The round's servers share one GPU (the design checked that they fit), so each claims no `gpu`: with one
    # each, the profile's budget ran a round of 17 in waves of 8, the second starting as the first ended.
    from specsweep.plan.rounds import SEQUENTIAL, SIDE_BY_SIDE
    from specsweep.workflow.round_inputs import launch_gpus

    budget = profile("default")["resources"]["gpu"]
    assert 17 * launch_gpus((SIDE_BY_SIDE, "fits"), 1) <= budget < 17
    assert launch_gpus((SEQUENTIAL, "one at a time"), 2) == 2
