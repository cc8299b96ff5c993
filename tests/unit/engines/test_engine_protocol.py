"""The engine interface takes the typed plan: every method of ``Engine`` that reads a plan, and every plan-time
rule, is given a ``contracts.plan.Plan`` (its labels beside it), never plan.json's object turned back into a dict."""

from __future__ import annotations

import inspect
import typing

import pytest

from specsweep.contracts.plan import Plan
from specsweep.engines import registry
from specsweep.engines.registry import ENGINES, Engine
from specsweep.engines.sglang import deepep, rules
from specsweep.engines.variants import VARIANTS
from specsweep.testing.doubles import plan_dict

#: The methods of the interface that take a plan.
PLAN_METHODS = sorted(name for name, fn in vars(Engine).items()
                      if callable(fn) and "plan" in inspect.signature(fn).parameters)


def _plan_hint(fn, module) -> object:
    return typing.get_type_hints(fn, vars(module))["plan"]


def test_every_plan_method_of_the_interface_takes_the_typed_plan():
    assert PLAN_METHODS == ["check_labels", "comm_profile", "context_limit", "preflight", "variant_evidence"]
    for name in PLAN_METHODS:
        assert _plan_hint(getattr(Engine, name), registry) is Plan, name


@pytest.mark.parametrize("engine", sorted(ENGINES))
def test_each_engine_takes_the_typed_plan_where_the_interface_does(engine):
    cls = ENGINES[engine]
    for name in PLAN_METHODS:
        assert _plan_hint(getattr(cls, name), inspect.getmodule(cls)) is Plan, (engine, name)


def test_every_plan_time_rule_takes_the_typed_plan_and_its_labels_apart():
    found = [*rules.RULES, *rules.FILE_RULES, *(rule for v in VARIANTS.values() for rule in v.rules)]
    assert len(found) > 10
    for rule in found:
        params = list(inspect.signature(rule).parameters)
        assert params[:3] == ["plan", "labels", "images"], rule.__name__
        assert _plan_hint(rule, inspect.getmodule(rule)) is Plan, rule.__name__
    assert deepep.rule_deepep_quantization in rules.FILE_RULES


def test_a_plan_json_object_is_refused_where_a_plan_is_taken():
    """plan.json's object is read with Plan.from_dict first: a dict where a Plan belongs fails at once."""
    data = plan_dict(name="x", engine="reference")
    for engine in sorted(ENGINES):
        with pytest.raises(AttributeError):
            ENGINES[engine]().check_labels(data, {"variant": []})
    assert ENGINES["reference"]().check_labels(Plan.from_dict(data), {"variant": []}).errors == []
