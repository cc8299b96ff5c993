"""What a sweep will cost, said before it starts: counted from the plans, a guessed time, a warning when big."""

from __future__ import annotations

from specsweep.plan.config import load_configs
from specsweep.plan.cost import WARN_LAUNCHES, config_cost, cost_lines
from specsweep.plan.resolve import resolve_sweep
from specsweep.testing.workflow import REPO


def _cost(config: dict):
    plans, launches = resolve_sweep(config)
    return config_cost(config, plans, launches)


def test_the_default_is_counted_from_its_plans_and_its_burn_in():
    config = load_configs([REPO / "config.yaml"])
    workload = config["defaults"]["workload"]
    config["burn_in"] = {"enabled": False}
    cost = _cost(config)
    per_launch = workload["repeats"] * workload["num_prompts"] + workload["warmup"]["max_requests"]
    # launches: 2, and the A/A control; up to 4 more in a third round (rounds.max_launches: 3)
    assert (cost.configurations, cost.launches, cost.more) == (4, 4 * 2 + 1, 4)
    assert cost.requests == (9 + 4) * per_launch and cost.output_tokens == cost.requests * workload["output_len"]
    line, warnings = cost_lines(cost)
    assert line.startswith("cost: 4 configuration(s), 9 planned server launch(es) (up to 4 in extra rounds "
                           "(rounds.max_launches)), at most 312 requests") and "guessed" in line
    assert warnings == []
    config["burn_in"] = {"enabled": True, "max_units": 8, "requests": 4}
    burnt = _cost(config)
    assert burnt.more == 4 + 8 and burnt.requests == cost.requests + 8 * (workload["warmup"]["max_requests"] + 4)
    assert "(up to 8 burn-in launches of nospec, up to 4 in extra rounds (rounds.max_launches)), at most " in \
        cost_lines(burnt)[0]


def test_a_huge_sweep_is_a_warning_naming_what_to_check():
    config = load_configs([REPO / "config.yaml"])
    config["defaults"]["launches"] = 300
    config["defaults"]["workload"]["num_prompts"] = 1_000_000_000
    _, warnings = cost_lines(_cost(config))
    assert any(f"more than {WARN_LAUNCHES}: check `launches:`" in w for w in warnings), warnings
    assert any("check `num_prompts:`" in w for w in warnings) and any("more than 24 h" in w for w in warnings)


def test_extra_rounds_of_a_budget_count_as_at_most():
    config = load_configs([REPO / "config.yaml"])
    config["burn_in"] = {"enabled": False}
    config["rounds"] = {"max_launches": 5}
    cost = _cost(config)
    assert (cost.launches, cost.more) == (9, 4 * 3) and "up to 12 in extra rounds" in cost_lines(cost)[0]
