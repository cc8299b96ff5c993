"""The first lines of report.md, rendered from report.json: what to deploy, the rule the verdicts use and
the controls, external servers, what the launches cost, and where speculation pays.

The closing summary on the console prints the same control sentences (``control_sentences``): they
have one home, here.
"""

from __future__ import annotations

import io
from collections.abc import Mapping, Sequence
from typing import Any

from specsweep.analysis.metrics import BASELINE_TOK_S
from specsweep.contracts.vocabulary import Verdict
from specsweep.report.linked import Curve, Linked
from specsweep.report.markdown import cpu_share, ratio_pct, verdict_text
from specsweep.report.markdown import f as _f
from specsweep.report.markdown import pct as _pct

# ------------------------------------------------------------------ what to deploy


def deploy_lines(deploy: Mapping[str, Any]) -> str:
    """"On this host, deploy X (+Y % over the baseline)" (one paragraph; with several workload points a list,
    one line per point), with the configurations the winner is not significantly faster than."""
    baseline = deploy["baseline"]
    if not deploy["answered"]:
        return ("**On this host:** what to deploy is not answered: no baseline that ended ok to compare with "
                f"({'none named' if baseline is None else baseline}).\n\n")
    points = deploy["points"]
    lines = [deploy_line(p, baseline, "On this host, " if len(points) == 1 else f"at {p['point']}, ")
             for p in points]
    if len(lines) == 1:
        return lines[0] + "\n\n"
    return "**On this host, by workload point:**\n" + "".join(f"- {line}\n" for line in lines) + "\n"


def deploy_line(at: Mapping[str, Any], baseline: str | None, lead: str) -> str:
    """The deploy line of one point (``deploy.points[i]`` of report.json)."""
    out = io.StringIO()
    best = at["deploy"]
    if best is not None:
        v = best["comparison"]
        spec = "with speculation" if best["speculation"] else "without speculation"
        out.write(f"**{lead}deploy `{best['config']}`** ({spec}): {ratio_pct(v['ratio'])} over `{baseline}`, the "
                  f"baseline without speculation (x{v['ratio']:.3f} [{v['ratio_ci'][0]:.3f}, {v['ratio_ci'][1]:.3f}], "
                  f"{v['verdict']}).")
        if best.get("own_verdict") and best.get("own_baseline") != baseline:
            out.write(f" Against its own backend without speculation (`{best['own_baseline']}`): "
                      f"{verdict_text(best['own_comparison'], 'n/a')}.")
        out.write(settings_text(best["settings"]))
        if best["ties"]:
            out.write(f" It is not significantly faster than {', '.join(f'`{t}`' for t in best['ties'])} (same "
                      "verdict method): any of them will do.")
    else:
        out.write(f"**{lead}keep `{baseline}`** (no configuration was significantly faster than it")
        top = at["highest"]
        if top is not None:
            out.write(f"; the highest median, `{top['config']}`, was {ratio_pct(top['ratio'])}, {top['verdict']}")
        out.write(").")
    return out.getvalue()


def settings_text(s: Mapping[str, Sequence[str]]) -> str:
    """The winner's settings against the baseline's (``analysis.answer.settings_against``), in words."""
    parts = []
    if s["flags"] or s["dropped"]:
        parts.append("server flags " + " ".join(f"`{f}`" for f in s["flags"])
                     + (f" (without {' '.join(f'`{d}`' for d in s['dropped'])})" if s["dropped"] else ""))
    if s["changed"] or s["unset"]:
        parts.append("environment " + " ".join(f"`{c}`" for c in s["changed"])
                     + (f" (unset {' '.join(f'`{u}`' for u in s['unset'])})" if s["unset"] else ""))
    text = f" Against the baseline it sets {'; '.join(parts)}." if parts else " It has the baseline's settings."
    if s["what_if"]:
        text += (f" Measured with {', '.join(f'`{w}`' for w in s['what_if'])}: a simulated accept length, a what-if "
                 "to leave unset (the real draft model's accept length decides).")
    return text


# ---------------------------------------------------------- the rule and the controls


def rule_line(rule: Mapping[str, Any]) -> str:
    """The rule the verdicts at one point use (``verdicts[i]`` of report.json), with the threshold and the
    smallest difference it sees."""
    noise = rule["noise"]
    if noise["var"] is None and not noise.get("sides"):  # nothing pooled: every run here failed or was contaminated
        return ("no verdicts: no configuration at this point has a result that is compared (a failed or "
                "contaminated run is never compared), so there is no variance to judge a difference by")
    if noise["var"] is None:
        return ("no verdicts: nothing was replicated (one launch and one round per configuration), so there is no "
                "variance to judge a difference by")
    if noise["unit"] == "round":
        return (f"**no configuration was launched twice, so the launch effect is unknown: the verdicts judge by the "
                f"rounds within launches (SD {_pct(noise['sd'])}, {noise['df']} degrees of freedom), and a "
                "launch-to-launch difference would be called as a real one** (set `launches: 2` or more, or keep "
                "the A/A control)")
    typical, model = rule["units"], rule["model"]
    pooled = (f"the launch-to-launch variance left by the model with the round as a block ({model['describe']}; the "
              "A/A control a level of its own)" if model is not None and model["blocked"] else
              f"the launch-to-launch variance pooled over {noise['units']} launches of {noise['sides']} configurations "
              "(the A/A control's included" + (f"; one-way model: {model['why']})" if model is not None else ")"))
    text = (f"{pooled} is an SD of {_pct(noise['sd'])} ({noise['df']} degrees of freedom): a "
            f"configuration of {typical} launch{'es' if typical > 1 else ''} against the baseline's "
            f"{rule['baseline_units']} is called beyond +-{_pct(rule['called_beyond'])}, and the smallest difference "
            f"this design sees with 80 % power is {_pct(rule['detectable'])}")
    effect = rule["smallest_effect"]
    if effect:
        if rule["resolved"]:
            text += f"; the {_pct(effect)} asked for is resolved"
        else:
            share = rule["request_share"]
            text += (f"; to resolve the {_pct(effect)} asked for, {rule['launches_needed']} launches per "
                     "configuration would be needed" + (
                         f" (request noise is {share:.0%} of the launch variance: more requests per launch cut only "
                         "that part, more launches cut all of it)" if share is not None else ""))
    return text


def control_lines(report: Mapping[str, Any]) -> str:
    """The report's first lines: the rule the verdicts use, what the A/A control found (it must not be
    called), and what the positive control found (it must be called slower than its twin)."""
    rules = report["verdicts"]
    if not rules:
        return ""
    out = io.StringIO()
    if len(rules) > 1:
        out.write("**Verdicts are on the decode rate, called when the 95 % interval of the ratio excludes 1.**\n\n")
        for rule in rules:
            out.write(f"- At point {rule['point']}: {rule_line(rule)}.\n")
        out.write("\n")
    else:
        out.write("**Verdicts are on the decode rate, called when the 95 % interval of the ratio excludes 1:** "
                  f"{rule_line(rules[0])}.\n\n")
    out.write(trend_lines(rules))
    out.write(aa_lines(report["controls"]["aa"]))
    out.write(positive_lines(report["controls"]["positive"]))
    return out.getvalue()


def trend_lines(rules: Sequence[Mapping[str, Any]]) -> str:
    """A trend of the decode rate over start time, and a first launch off the model, where named
    (``blocks.trend``, ``blocks.cold_start`` of each point's rule): empty otherwise."""
    lines = []
    for rule in rules:
        where = "" if len(rules) == 1 else f" at point {rule['point']}"
        for key, label in (("trend", "Trend"), ("cold_start", "Cold start")):
            found = rule.get(key) or {}
            if found.get("named"):
                lines.append(f"- {label}{where}: {found['text']}.\n")
    return "".join(lines) + ("\n" if lines else "")


def aa_lines(aa: Mapping[str, Any]) -> str:
    """The A/A control at every point: the baseline's control launch against its first launch."""
    baseline = aa["baseline"]
    if baseline is None:
        return "A/A control: none (no baseline): no verdict is called.\n\n"
    if not any(p["result"] for p in aa["points"]):
        why = "disabled (aa_control: false)" if not aa["planned"] else "no control launch ended ok"
        return f"A/A control: {why}: the same configuration was not launched twice.\n\n"
    out = io.StringIO()
    # An external baseline is never relaunched: its control is a later round against the same server.
    again = ("measured again at a random place of round 1 against the same running server (not "
             "relaunched)" if aa["external"] else "launched again at a random place of round 1")
    twice = "measured twice" if aa["external"] else "launched twice"
    for p in aa["points"]:
        where = "" if p["point"] == "default" else f" at point {p['point']}"
        result = p["result"]
        if not result:
            out.write(f"- A/A control{where}: no control launch ended ok.\n")
            continue
        comp = result["comparison"]
        judged = (f"x{comp['ratio']:.3f} [{comp['ratio_ci'][0]:.3f}, {comp['ratio_ci'][1]:.3f}], called beyond "
                  f"+-{_pct(comp['threshold'])}" if "ratio" in comp else comp.get("note", "no interval"))
        if comp.get("model") == "blocked" and "ratio" in comp:
            judged += f"; judged against all of {baseline}'s launches, round effects removed"
        if p["called"]:
            verdict = (f"**CALLED {comp['verdict']}: the same configuration {twice} differed beyond the launch "
                       "variance this sweep measured (the machine drifted during the sweep, or launches differ "
                       "more than the model allows): read every verdict with care**")
        elif comp["verdict"] == Verdict.INSUFFICIENT:  # nothing was judged: the control did not pass
            verdict = (f"**not judged ({comp['verdict']})**: whether two launches of one configuration differ "
                       "is untested")
        else:
            verdict = f"{comp['verdict']}, as it must be"
        if not p["called"] and p["drift_beyond_sd"]:
            verdict += (" (its drift is larger than the pooled launch SD of "
                        f"{_pct(p['launch_sd'])}: the machine changed during the sweep, and every threshold is wide "
                        "for it)")
        medians = result["launch_medians"]
        out.write(f"- A/A control{where}: {baseline} {again} (launch "
                  f"{result['control']}) against its launch {result['first']}: {_f(medians[result['first']])} vs "
                  f"{_f(medians[result['control']])} decode tok/s (drift {result['drift'] * 100:+.1f} %): "
                  f"{verdict} ({judged}).\n")
    return out.getvalue() + "\n"


def positive_lines(positive: Mapping[str, Any] | None) -> str:
    """The positive control at every point: the slowed copy against its twin; it must be called slower."""
    if not positive:
        return ("Positive control: none (`positive_control` not set): whether the sweep sees a known effect is "
                "untested.\n\n")
    name, of, slowdown = positive["name"], positive["of"], positive["slowdown"]
    out = io.StringIO()
    for p in positive["points"]:
        where = "" if p["point"] == "default" else f" at point {p['point']}"
        head = f"- Positive control{where}: {name} ({of} with every engine step slowed by {_pct(slowdown)})"
        if "not_judged" in p:
            bad = [f"{x['config']}: {x['status'] or 'no summary'}" for x in p["not_judged"]]
            out.write(f"{head}: not judged ({', '.join(bad)}).\n")
            continue
        v = p["comparison"]
        if "ratio" not in v:
            out.write(f"{head}: {v['verdict']}.\n")
            continue
        judged = (f"x{v['ratio']:.3f} [{v['ratio_ci'][0]:.3f}, {v['ratio_ci'][1]:.3f}] against {of}, expected "
                  f"x{p['expected_ratio']:.3f}, called beyond +-{_pct(v['threshold'])}")
        if p["called"]:
            out.write(f"{head}: called slower, as it must be ({judged}): this sweep sees a {_pct(slowdown)} "
                      "slowdown.\n")
        else:
            need = p["launches_needed"]
            out.write(f"{head}: **NOT called slower ({v['verdict']}; {judged}): this sweep cannot see a "
                      f"{_pct(slowdown)} effect**" + (f"; {need} launches per configuration would (80 % power)"
                                                       if need else "") + ".\n")
    return out.getvalue() + "\n"


def _sentences(text: str) -> list[str]:
    """report.md's lines as plain sentences for the console: no list marks or bold."""
    lines = [line.removeprefix("- ").replace("**", "").strip() for line in text.splitlines()]
    return [line for line in lines if line]


def control_sentences(report: Mapping[str, Any]) -> list[str]:
    """A trend or cold start where named, and the A/A and positive control results, as plain sentences (the
    closing summary's)."""
    return _sentences(trend_lines(report["verdicts"]) + aa_lines(report["controls"]["aa"])
                      + positive_lines(report["controls"]["positive"]))


def deploy_sentences(deploy: Mapping[str, Any]) -> list[str]:
    """report.md's deploy line(s) as plain sentences (the closing summary's): with several workload points a
    lead line, then one line per point. The configuration named is report.json's ``deploy``, which is never a
    control."""
    return _sentences(deploy_lines(deploy))


def external_lines(external: Mapping[str, str | None], speculative_baseline: str | None = None) -> str:
    """What runtime external means for reading the results (empty when no configuration used it), and a
    baseline whose server says it runs speculation (``speculative_baseline``: its name and algorithm)."""
    if not external:
        return ""
    named = ", ".join(f"{c} ({u})" for c, u in sorted(external.items()))
    text = (f"External servers: {named} ran without this workflow, which attached to them (runtime external). "
            "Launch noise and the host lock do not apply to them: nothing was launched, so no launch-to-launch "
            "effect of their own exists to measure, and the one-server-per-host lock was not taken; the workflow "
            "still waited until no other specsweep server ran on this host and marks a result measured while "
            "one did `contaminated` (runs elsewhere do not know of an external server). Their launches are "
            "measurement rounds against the same running server, and an A/A control of such a baseline measures "
            "drift over the sweep, not a relaunch. What they run is what their /server_info said (each "
            "launch.json's server_info).\n\n")
    if speculative_baseline:
        text += (f"**The baseline, {speculative_baseline}, runs speculative decoding**: break-even and `pays?` "
                 "assume a baseline without speculation, so the baseline's own row is not judged against itself, "
                 "and the other rows' break-even is against a speculative rate; name a server without speculation "
                 "as baseline: for the answer this report is for.\n\n")
    return text


def speculative_baseline(data: Mapping[str, Any]) -> str | None:
    """``name (its server says ALGO)`` when report.json's baseline row runs speculation, else None."""
    name = (data.get("baseline") or {}).get("name")
    spec = sorted({str(r["spec"]) for r in data.get("rows") or [] if r.get("config") == name and r.get("spec")})
    return f"{name} (its server says {', '.join(spec)})" if spec else None


# ------------------------------------------------------------------ the design


def burn_in_line(record: Mapping[str, Any] | None) -> str:
    """The burn-in before round 1: its units' decode rates and times to ready, how long it took and whether it
    settled (and, when not, what kept moving)."""
    if not record:
        return "Burn-in: none recorded (off, or this report's round 1 ran in an earlier invocation without one)."
    units = record.get("units") or []
    rates = ", ".join(_f(u.get("decode_tok_s")) for u in units)
    ready = record.get("ready_tolerance")
    if ready is None:  # a record of format 1: the decode rate alone
        rule, readies = f"within {record['tolerance']:.0%} of the unit before", ""
    else:
        rule = (f"the decode rate within {record['tolerance']:.0%} and the time to ready within {ready:.0%} "
                f"(+{_f(record.get('ready_poll_s'), '{:.2f}')} s) of the unit before")
        readies = ", time to ready s " + ", ".join(_f(u.get("ready_s")) for u in units)
    if record.get("steady"):
        state = f"steady ({rule})"
    else:
        moving = [what for what, key in (("the decode rate", "rate_steady"), ("the time to ready", "ready_steady"))
                  if key in record and not record[key]]
        state = (f"NOT steady after {len(units)} units: the host kept changing"
                 + (f" ({' and '.join(moving)} at the last unit; asked: {rule})" if moving else ""))
    return (f"Burn-in: {len(units)} unmeasured launches of {record.get('config')} in "
            f"{_f(record.get('wall_s'))} s, decode tok/s per unit {rates}{readies}: {state}; it enters no verdict.")


def design_lines(design: Mapping[str, Any] | None, burn_in: Mapping[str, Any] | None) -> str:
    """How the launches were grouped and ordered, how many rounds ran and what ended them, the burn-in
    (report.json's ``design`` and ``burn_in``)."""
    if not design:
        return ""
    seed = (design.get("rounds") or {}).get("seed")
    out = [(f"Design: **{design['design']}** ({design['why']}); launches in rounds, each round in a seeded random "
            f"order (rounds.seed {seed}), the round a block of the verdicts.")]
    if design.get("rounds_run") is not None:
        out.append(f"Rounds: {design['rounds_run']} ran; they ended by **{design.get('ended_by') or 'n/a'}**: "
                   f"{design.get('ended_why')}.")
    out.append(burn_in_line(burn_in))
    return "\n".join(f"- {line}" for line in out) + "\n\n"


# ------------------------------------------------------------------ launches


#: What the order check compared (report.json's ``launches.order.by``), in words.
_ORDER_BY = {"start": "",
             "start and first window": "; a side-by-side round's launches, whose servers start together, by their "
                                       "first measuring window, i.e. the order their turns began"}


def order_text(order: Mapping[str, Any]) -> str:
    """Whether the launches ran in the planned order (a sentence), and what was compared."""
    if not order["planned"]:
        return "planned order unknown"
    by = _ORDER_BY.get(order.get("by") or "start", "")
    if order["in_order"]:
        return f"in the planned interleaved order (round by round, each round in its seeded order{by})"
    ran, expected = order["ran"], order["expected"]
    return (f"NOT in the planned order from launch #{order['first_bad'] + 1} on (ran {ran[0]}/{ran[1]}, "
            f"planned {expected[0]}/{expected[1]}{by}); launches of a configuration rerun alone run when Snakemake "
            "reaches them")


def side_by_side_text(side: Mapping[str, Any] | None) -> str:
    """What side-by-side measurement did (report.json's ``launches.side_by_side``), a sentence; empty when no
    launch was measured side by side."""
    if not side:
        return ""
    alone = side.get("alone") or []
    alone_text = "" if not alone else (f"; {len(alone)} with no partner's server up ("
                                       + ", ".join(f"{c}/{lid}" for c, lid in alone[:4])
                                       + (" ..." if len(alone) > 4 else "") + ")")
    share = side.get("partner_cpu_share_max")
    cpu = ("the partners' CPU not recorded" if share is None else
           f"the partners' servers used at most {cpu_share(share)} of a core over one launch's windows "
           f"({side['worst'][0]}/{side['worst'][1]}), {cpu_share(side.get('worst_window'))} in the worst single "
           f"window (a launch at {cpu_share(side.get('limit'))} or more"
           + ("" if side.get("busiest_limit") is None else
              f", or with one partner at {cpu_share(side['busiest_limit'])} or more,")
           + " is contaminated)")
    return (f" Side by side: {side['launches']} of {side['of']} launches measured in turn with their round's other "
            f"servers up, in {side['windows']} windows{alone_text}; {cpu}.")


def launch_lines(launches: Mapping[str, Any]) -> str:
    """Launch count and time: what replication cost on this machine."""
    entries = launches["entries"]
    if not entries:
        return ""
    span = f"; first start to last end {launches['span_s'] / 60:.1f} min" if launches["span_s"] is not None else ""
    server = launches.get("server_s")
    wait = launches.get("host_wait_s")
    served = ("server time not recorded" if server is None else
              f"{server / 60:.1f} min of server time in all (median {_f(launches['median_server_s'])} s per launch, "
              f"of which {_f(launches['median_ready_s'])} s until ready)")
    waited = "" if not wait else (f", besides {wait / 60:.1f} min waiting for the host (its lock, or another "
                                  "specsweep server running)")
    return (f"Launches: {len(entries)} server launches of {launches['configurations']} configurations, "
            f"{served}{waited}{span}; ran {order_text(launches['order'])}."
            f"{side_by_side_text(launches.get('side_by_side'))}\n\n")


# ------------------------------------------------------------ break-even curves


def crossing_text(group: Curve) -> str:
    """The measured crossing as a phrase: ``2.31 [2.10, 2.52]``, ``< 1.50``, ``> 3.00``."""
    c = group.crossing
    if c is None:
        return "n/a (no baseline decode tok/s)" if group.base is None else "n/a"
    xs = [r["accept_length"] for r in group.rows]
    if c["where"] == "below_range" and c.get("crossings", 0) == 0:
        return f"< {min(xs):.2f} (pays at every measured accept length)"
    if c["where"] == "above_range":
        return f"> {max(xs):.2f} (pays at none of them)"
    if c["where"] == "below_range":
        return (f"< {min(xs):.2f}, but NOT monotone: the curve passes the baseline {c['crossings']} times "
                "(read the points)")
    iv = group.interval or {}
    lo = f"< {min(xs):.2f}" if iv.get("low_open") else _f(iv.get("low"), "{:.2f}")
    hi = f"> {max(xs):.2f}" if iv.get("high_open") else _f(iv.get("high"), "{:.2f}")
    text = f"**{c['x']:.2f}** [{lo}, {hi}]"
    if c.get("crossings", 1) > 1:
        text += (f"; NOT monotone: the curve passes the baseline {c['crossings']} times, so it does not pay at "
                 "every accept length above X (read the points)")
    return text


def break_even_table(groups: Sequence[Curve], crossing_method: str) -> str:
    """The report's first table: above which accept length speculation pays, per backend and point."""
    if not groups:
        return ""
    out = io.StringIO()
    out.write("## On this setup, speculation pays above accept length X\n\n")
    out.write("| configurations (all but accept length equal) | point | measured crossing X [95% CI] "
              "| computed break-even (cycle time x baseline tok/s) | baseline tok/s (decode rate) "
              "| accept lengths measured |\n")
    out.write("|---|---|---|---|---|---|\n")
    for g in groups:
        comp = ("n/a" if not g.computed else f"{g.computed_mean:.2f} (range {min(g.computed):.2f}-"
                f"{max(g.computed):.2f} over {len(g.computed)} points)")
        base_tok = _f(g.base[BASELINE_TOK_S]) if g.base else "n/a"
        accs = ", ".join(f"{r['accept_length']:.2f}" for r in g.rows)
        out.write(f"| {g.label} | {g.point} | {crossing_text(g)} | {comp} | {base_tok} | {accs} |\n")
    out.write(f"\nMeasured crossing: {crossing_method}; tok/s = the decode rate (the verdicts' statistic), of the "
              "configurations and of the baseline alike. The computed break-even is each configuration's cycle "
              "time x the baseline's decode rate at the same point; the two agree when the cycle time does not "
              "depend on the accept length. See `plots/break_even.png`.\n\n")
    return out.getvalue()


def head(report: Linked) -> str:
    """Everything report.md says before the baseline line, in order."""
    data = report.data
    return (deploy_lines(data["deploy"]) + control_lines(data) + design_lines(data["design"], data["burn_in"])
            + external_lines(data["external"], speculative_baseline(data))
            + launch_lines(data["launches"]) + break_even_table(report.curves, data["method"]["crossing"]))
