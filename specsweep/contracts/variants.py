"""What a backend variant is: the record every variant entry fills, and the records its fields hold.

A *variant* is a way a server communicates that a configuration can ask for
(its ``variant:`` label): SGLang's custom all-reduce, MSCCL++, DeepEP, NCCL
tuned through its environment, the reference engine's ``all-reduce:shm``...
It is the project's main axis, and every stage needs to know something about
one: the plan-time rules, the log check, the trace split, the provenance, the
images. So each variant is one :class:`Variant` entry that holds all of it
(``specsweep.engines.variants.VARIANTS``), and every list a stage needs is
derived from those entries, as the endpoint registry is
(``contracts.endpoints``).

This floor holds only the shapes, so that any stage may read an entry:

* :class:`Signature`: one log line that proves something (a variant on, fallen
  back, a note; or, for the engine's failure table, why a server failed), with
  the source it was written from;
* :class:`KernelPattern` and :class:`Implementation`: the kernel names in a
  profiler trace that are one implementation's communication;
* :class:`Finding` and ``Rule``: a plan-time rule and its verdict;
* :class:`Variant`: the entry.

Adding a variant: its entry in ``engines.variants``, its image target (a
Dockerfile stage) where it needs one, and its test.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from specsweep.contracts.plan import Plan


@dataclass(frozen=True)
class Signature:
    """One log line and what it proves."""

    variant: str  # a variant name, or for a failure table the failure's name
    kind: str  # "active" | "fallback" | "note" | "failure" (NCCL's parser lines: "nccl")
    pattern: re.Pattern[str]
    source: str  # file:line in the library that prints it (SGLang 0.5.23's wheel, NCCL v2.30.7-1, NVSHMEM v3.4.5-0)
    literal: str  # verbatim fragment of the format string at ``source``
    level: str = "warning"  # the call that prints it: logger.<level>, or "raise" (logged by the process's handler)
    # Where the call at ``source`` formats its text from a constant defined elsewhere:
    # (file:line of the constant, verbatim fragment of it); None when the text is at ``source``.
    template: tuple[str, str] | None = None
    # For a line printed both while starting and while serving: which of the two this signature names
    # ("before_ready": before the server answered /ready; "after_ready": after); None for either.
    when: str | None = None
    library: str = "sglang"  # whose source ``source`` is: "sglang" (the engine's wheel) or "nvshmem"


def log_line(variant: str, kind: str, pattern: str, source: str, literal: str, level: str = "warning",
             template: tuple[str, str] | None = None, when: str | None = None,
             library: str = "sglang") -> Signature:
    """A :class:`Signature` with its pattern compiled."""
    return Signature(variant, kind, re.compile(pattern), source, literal, level, template, when, library)


@dataclass(frozen=True)
class KernelPattern:
    """One family of communication kernels (or CPU ranges) in a profiler trace and where its names come from."""

    impl: str  # the implementation's id (``Implementation.id``)
    collective: str  # all_reduce | all_gather | reduce_scatter | dispatch | combine | copy | other
    pattern: re.Pattern[str]
    source: str  # repository@version and file:line (or the shipped binary) the name is taken from
    one_kernel_per_call: bool = True  # False: consecutive kernels of this impl on one stream are one call


@dataclass(frozen=True)
class Implementation:
    """What a trace shows of one communication implementation: its id, its label and its kernel names
    (first match wins, in the order of the entries, then of ``kernels``). Several variants may share one
    (NCCL: tuned through its environment, or the reference engine's ``all-reduce:nccl``)."""

    id: str
    label: str
    kernels: tuple[KernelPattern, ...] = ()


@dataclass(frozen=True)
class Finding:
    """One plan-time rule's verdict. ``error`` stops the configuration; ``warning`` is reported."""

    severity: str  # "error" | "warning"
    rule: str
    message: str


#: A configuration's labels as a plan-time rule reads them (``plan.resolve.build_labels``: ``variant``,
#: ``expect``, ``expect_signature``); None where they are not known (a preflight job reads plan.json alone,
#: and a rule whose verdict depends on them says so in a warning there).
Labels = Mapping[str, Any] | None

#: A plan-time rule: (the plan, its labels, the config's ``images:``) -> findings.
Rule = Callable[[Plan, Labels, Mapping[str, Any] | None], list[Finding]]


@dataclass(frozen=True)
class Variant:
    """One backend variant, all that the stages need to know of it.

    ``precedence``: its place in the engine's dispatch of one all-reduce when several are on (smaller
    first: the earlier takes the call, the later is shadowed); None when it does not compete for the
    all-reduce. ``packages``: the distributions the provenance records for it (its label -> the
    distribution names, first found wins). ``rules``: the plan-time rules its label adds, run on the
    plans that request it. ``image_target``: the stage of the engine's Dockerfile that carries it (None:
    the engine's stock image does).
    """

    name: str  # the ``variant:`` label's value
    engine: str  # the name of the engine (``engines.registry``) that runs it
    implementation: Implementation | None  # what a trace shows when it runs (None: nothing of its own)
    log: tuple[Signature, ...] = ()
    precedence: int | None = None
    packages: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    rules: tuple[Rule, ...] = ()
    image_target: str | None = None


def requested_variants(labels: Mapping[str, Any]) -> list[str]:
    """A plan's (or its labels') ``variant`` as a sorted list (the config may give a string)."""
    value = labels.get("variant") or []
    if isinstance(value, str):
        value = [value]
    return sorted(set(value))
