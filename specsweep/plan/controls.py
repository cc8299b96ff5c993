"""The positive control: a configuration with a known injected slowdown, that the verdict must call.

Beside the A/A control (the baseline launched once more, ``plan.launches``),
which a verdict must *not* call different, a sweep can carry a positive
control, which it *must* call slower than its twin::

    positive_control:
      of: eagle3-shm        # the twin: any configuration of the sweep (a grid member by its full name)
      slowdown: 0.10        # every engine step sleeps 0.10 x its own duration: +10 % cycle time

It becomes one more configuration, ``<of>-slow<percent>`` (``eagle3-shm-slow10``;
``slowdown: 0.025`` gives ``-slow2p5``), which extends the twin and adds the
reference engine's test-only fault ``SPECSWEEP_TEST_STEP_SLOWDOWN=<fraction>``
to its environment. It is an ordinary configuration afterwards: its own plan,
launches (the twin's count, interleaved with every other configuration's by
``plan.launches.launch_order``), summary and report row. The report compares
it with its twin and says whether the verdict called the known effect, i.e.
whether the sweep can see an effect of that size.

Only an engine that implements the fault can run it (``FAULT_ENGINES``): a
control of another engine's configuration is a plan-time error naming the key
(``control_problems``), not a control that silently measures nothing.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from specsweep.engines.reference import STEP_SLOWDOWN_ENV  # the test-only fault the control sets
from specsweep.plan.grid import value_label

#: The config key.
KEY = "positive_control"
#: Engines that implement ``STEP_SLOWDOWN_ENV`` (each engine step sleeps that fraction of its own duration).
FAULT_ENGINES = ("reference",)


def control_name(of: str, slowdown: float) -> str:
    """``eagle3-shm``, 0.10 -> ``eagle3-shm-slow10`` (the slowdown in percent, as a name part)."""
    return f"{of}-slow{value_label(f'{round(slowdown * 100, 6):g}')}"


def env_value(slowdown: float) -> str:
    """The fault's value as the process sees it (``0.1``)."""
    return f"{slowdown:g}"


def positive_control(config: Mapping[str, Any]) -> dict[str, Any] | None:
    """``{"name", "of", "slowdown", "env"}`` of the config's positive control, or None without one."""
    raw = config.get(KEY)
    if not raw:
        return None
    of, slowdown = raw["of"], float(raw["slowdown"])
    return {"name": control_name(of, slowdown), "of": of, "slowdown": slowdown, "env": STEP_SLOWDOWN_ENV}


def expand_control(config: Mapping[str, Any]) -> dict[str, Any]:
    """``config`` (grids already expanded) with the positive control added as a configuration.

    Raises ``ValueError(problems)`` when ``of`` is not a configuration or the
    generated name is already another one (the caller names the file); a
    config that already holds the control as generated is returned as it is.
    """
    control = positive_control(config)
    if control is None:
        return dict(config)
    configurations: Mapping = config.get("configurations") or {}
    of, name = control["of"], control["name"]
    if of not in configurations:
        raise ValueError([f"{KEY}.of: {of!r} is not a configuration (a grid member by its full name); "
                          f"allowed: {sorted(configurations)}"])
    percent = f"{round(control['slowdown'] * 100, 6):g}"
    entry = {
        "extends": of,
        "env": {STEP_SLOWDOWN_ENV: env_value(control["slowdown"])},
        "description": f"Positive control: {of} with every engine step slowed by {percent} % of its own duration "
                       f"(test-only fault {STEP_SLOWDOWN_ENV}); the verdict must call it slower than {of}",
    }
    if configurations.get(name) == entry:
        return dict(config)  # already expanded: a config checked twice
    if name in configurations:
        raise ValueError([f"{KEY}: the control's name {name!r} is already a configuration; rename that one"])
    return {**config, "configurations": {**configurations, name: entry}}


def control_problems(config: Mapping[str, Any], plans: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """Why the resolved positive control cannot run (its engine lacks the fault), or []."""
    control = positive_control(config)
    if control is None or control["name"] not in plans:
        return []
    engine = plans[control["name"]]["engine"]
    if engine in FAULT_ENGINES:
        return []
    return [f"{KEY}.of: {control['of']!r} runs engine {engine!r}, which has no step-slowdown fault "
            f"({STEP_SLOWDOWN_ENV}); a positive control needs engine {' or '.join(map(repr, FAULT_ENGINES))}"]


def control_params(config: Mapping[str, Any]) -> dict[str, Any] | None:
    """What the report needs to judge the control: ``{"name", "of", "slowdown"}``, or None."""
    control = positive_control(config)
    return None if control is None else {k: control[k] for k in ("name", "of", "slowdown")}
