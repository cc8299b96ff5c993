"""What a sweep will cost, said before it starts: counted from the plans, a guessed time, a warning when big."""

from __future__ import annotations

from specsweep.plan.config import load_configs
from specsweep.plan.cost import WARN_LAUNCHES, cost_lines, sweep_cost
from specsweep.plan.launches import launch_order
from specsweep.plan.resolve import resolve_sweep
from specsweep.testing.workflow import REPO


def _cost(config: dict):
    plans, launches = resolve_sweep(config)
    return sweep_cost(plans, launch_order(launches, config.get("baseline"), bool(config.get("aa_control", True))))


def test_the_default_is_counted_from_its_plans():
    config = load_configs([REPO / "config.yaml"])
    cost = _cost(config)
    workload = config["defaults"]["workload"]
    per_launch = workload["repeats"] * workload["num_prompts"] + workload["warmup"]["max_requests"]
    assert (cost.configurations, cost.launches) == (4, 4 * 2 + 1)  # launches: 2, and the A/A control
    assert cost.requests == 9 * per_launch and cost.output_tokens == cost.requests * workload["output_len"]
    line, warnings = cost_lines(cost)
    assert line.startswith("cost: 4 configuration(s), 9 server launch(es), ") and "guessed" in line
    assert warnings == []


def test_a_huge_sweep_is_a_warning_naming_what_to_check():
    config = load_configs([REPO / "config.yaml"])
    config["defaults"]["launches"] = 300
    config["defaults"]["workload"]["num_prompts"] = 1_000_000_000
    _, warnings = cost_lines(_cost(config))
    assert any(f"more than {WARN_LAUNCHES}: check `launches:`" in w for w in warnings), warnings
    assert any("check `num_prompts:`" in w for w in warnings) and any("more than 24 h" in w for w in warnings)
