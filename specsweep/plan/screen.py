"""What a race's screen needs at plan time: which configurations differ only in the communication setting, and
the micro-benchmark runs that measure each distinct setting once (``screen:`` of the config; the screen itself is
``analysis.screen``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from specsweep.contracts.plan import setting
from specsweep.files import canonical_json

#: The plan sections a communication setting may name (``screen.settings``: ``<section>.<key>``).
SETTING_SECTIONS = ("server_args", "env")


@dataclass(frozen=True)
class ScreenSettings:
    """``screen:`` of the config (schemas/config.schema.yaml)."""

    enabled: bool = False
    settings: tuple[str, ...] = field(default_factory=tuple)
    max_error: float = 0.15
    #: launch every configuration set aside once anyway (round 1, outside the race): the screen's check run
    check: bool = False

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> "ScreenSettings":
        own = dict(config.get("screen") or {})
        return cls(enabled=bool(own.get("enabled", False)), settings=tuple(own.get("settings") or ()),
                   max_error=float(own.get("max_error", 0.15)), check=bool(own.get("check", False)))


def setting_problems(settings: Sequence[Any]) -> list[str]:
    """``screen.settings`` entries that do not name a plan setting (``server_args.<flag>`` or ``env.<VAR>``)."""
    out = []
    for k, name in enumerate(settings):
        section, dot, key = str(name).partition(".")
        if section not in SETTING_SECTIONS or not dot or not key:
            out.append(f"screen.settings[{k}]: {name!r} names no plan setting; allowed: "
                       f"{' or '.join(f'{s}.<key>' for s in SETTING_SECTIONS)} (as a grid axis names it)")
    return out


def group_key(plan: Mapping[str, Any], settings: Sequence[str]) -> str:
    """The plan's identity with the communication settings removed: what a group shares. Left out besides them:
    the name, the argv and the engine's facts, which follow from the settings (``facts.all_reduce_backend``), and
    the plan file's format version (how the plan is written, not what the server is)."""
    drop: dict[str, set[str]] = {}
    for name in settings:
        section, _, key = name.partition(".")
        drop.setdefault(section, set()).add(key)
    out = {k: v for k, v in plan.items() if k not in ("name", "argv", "facts", "format_version")}
    for section, keys in drop.items():
        out[section] = {k: v for k, v in (plan.get(section) or {}).items() if k not in keys}
    return canonical_json(out)


def groups(plans: Mapping[str, Mapping[str, Any]], settings: Sequence[str]) -> dict[str, list[str]]:
    """Configurations that differ only in the communication ``settings``: ``{group: [names]}``, each group
    named after its first member by name, members sorted (``group_key``)."""
    by_key: dict[str, list[str]] = {}
    for name in sorted(plans):
        by_key.setdefault(group_key(plans[name], settings), []).append(name)
    return {members[0]: members for members in by_key.values()}


def setting_of(plan: Mapping[str, Any], settings: Sequence[str]) -> dict[str, Any]:
    """The plan's communication setting: each of ``settings`` and its value (None: unset)."""
    return {name: setting(plan, name) for name in settings}


def bench_settings(plans: Mapping[str, Mapping[str, Any]], settings: Sequence[str]) -> list[dict[str, Any]]:
    """The micro-benchmark runs a screen needs: one per group and distinct setting (the group fixes the message
    size, world size and device), each ``{"group", "setting", "config": the member it runs for, "members"}``."""
    out = []
    for group, members in groups(plans, settings).items():
        seen: dict[str, dict[str, Any]] = {}
        for name in members:
            value = setting_of(plans[name], settings)
            run = seen.setdefault(canonical_json(value), {"group": group, "setting": value, "config": name,
                                                          "members": []})
            run["members"].append(name)
        out.extend(seen.values())
    return out


def unvaried_settings(config: Mapping[str, Any], plans: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """With ``screen.enabled``, each of ``screen.settings`` that takes one value in every plan (a typo, or a
    setting the grid does not vary): it would group nothing, and the screen would set nothing aside."""
    own = ScreenSettings.from_config(config)
    if not own.enabled:
        return []
    out = []
    for k, name in enumerate(own.settings):
        values = {canonical_json(setting(plan, name)) for plan in plans.values()}
        if len(values) < 2:
            varied = sorted({f"{section}.{key}" for section in SETTING_SECTIONS for key in
                             {key for plan in plans.values() for key in (plan.get(section) or {})}
                             if len({canonical_json((p.get(section) or {}).get(key)) for p in plans.values()}) > 1})
            out.append(f"screen.settings[{k}]: {name!r} takes one value in every configuration, so it tells no "
                       f"configuration from another; allowed: a setting the configurations vary: {varied}")
    return out
