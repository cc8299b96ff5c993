"""What an engine's preflight returns (shared by every engine, so it sits below them)."""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class PreflightResult:
    """Errors stop the configuration before any build or launch; warnings are kept in preflight.json.

    Every message names the configuration and the key (``configurations.<name>...``).
    ``checked_with`` says which parser judged the argv.
    """

    errors: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    checked_with: str = ""
    # What the engine loaded to check the plan (SGLang: each model/draft directory through its ModelConfig).
    loaded: list[dict] = field(default_factory=list)
