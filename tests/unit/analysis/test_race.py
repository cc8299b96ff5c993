"""A race (``analysis.race``, ``workflow.rounds.decide_race``) on synthetic launch records of known speeds:
who is dropped, when the survivors tie, what ends the race, and the answer report.json gives."""

from __future__ import annotations

import math
import statistics
from pathlib import Path

import numpy as np
import pytest

from specsweep.analysis.race import DROPPED, FAILED, LEADING, RACING, TIED, WON, judge_rows, race_record
from specsweep.analysis.rows import config_rows, explode_points
from specsweep.contracts.summary import ConfigSummary
from specsweep.plan.rounds import RACE, RoundSettings
from specsweep.testing.reports import launches_summary, render_summaries
from specsweep.workflow.rounds import BUDGET, NOT_COMPARABLE, ONE_LEFT, TIE, decide, decide_race

RACE_SETTINGS = RoundSettings(max_launches=4, mode=RACE)


def sweep_summaries(slowdowns: dict[str, float], rounds: dict[str, int], launch_sd: float, seed: int = 0,
                    jitter: float = 0.02) -> list[ConfigSummary]:
    """The summaries of configurations whose decode time is ``1 + slowdown`` x the fastest's, each
    launched in rounds 1..``rounds[name]`` (in a random order per round), each launch off by a log-normal
    factor of SD ``launch_sd``."""
    rng = np.random.default_rng(seed)
    starts: dict[str, dict[str, tuple[float, float]]] = {n: {} for n in slowdowns}
    minute = 0
    for r in range(1, max(rounds.values()) + 1):
        for name in rng.permutation(sorted(n for n in slowdowns if rounds[n] >= r)):
            starts[name][str(r)] = (minute, math.exp(rng.normal(0, launch_sd)))
            minute += 1
    return [launches_summary(n, 12.0 * (1 + slowdowns[n]), s, 100 + 7 * len(n), jitter) for n, s in starts.items()]


def sweep_rows(slowdowns: dict[str, float], rounds: dict[str, int], launch_sd: float, seed: int = 0,
               jitter: float = 0.02) -> list[dict]:
    """The report's rows of ``sweep_summaries``."""
    rows, _ = config_rows(explode_points(sweep_summaries(slowdowns, rounds, launch_sd, seed, jitter)), None, 0.05)
    return rows


def test_a_survivor_shown_slower_than_the_best_is_dropped_and_the_others_race_on():
    rows = sweep_rows({"a": 0.0, "b": 0.01, "slow": 0.4}, {"a": 2, "b": 2, "slow": 2}, 0.01)
    got = judge_rows(rows, ["a", "b", "slow"], 0.05, 2)
    assert got["best"] in ("a", "b") and got["dropped"] == ["slow"], got
    assert got["survivors"] == ["a", "b"] and got["model"] == "blocked"
    slow = next(a for a in got["against"] if a["config"] == "slow")
    assert slow["verdict"] == "faster" and slow["ratio"] == pytest.approx(1.4, rel=0.05)
    assert slow["p_holm"] is not None, "the round's comparisons with the best are one Holm family"
    decision = decide(2, 2, RACE_SETTINGS, [], None, None, 2.0, [], 0.05, got)
    assert decision["continue"] and decision["next"] == [["a", "3"], ["b", "3"]], decision
    assert "slow (slower than" in decision["why"]


def test_the_planned_rounds_drop_no_one():
    rows = sweep_rows({"a": 0.0, "slow": 0.4}, {"a": 2, "slow": 2}, 0.01)
    got = judge_rows(rows, ["a", "slow"], 0.05, 2, dropping=False)
    assert got["dropped"] == [] and got["against"][0]["verdict"] == "faster"
    decision = decide(2, 3, RACE_SETTINGS, [], None, None, 2.0, [("a", "3"), ("slow", "3")], 0.05, got)
    assert decision["continue"] and decision["next"] == [["a", "3"], ["slow", "3"]]


def test_one_left_ends_the_race():
    rows = sweep_rows({"a": 0.0, "slow": 0.3, "slower": 0.5}, {"a": 2, "slow": 2, "slower": 2}, 0.01)
    got = judge_rows(rows, ["a", "slow", "slower"], 0.05, 2)
    assert got["best"] == "a" and sorted(got["dropped"]) == ["slow", "slower"]
    decision = decide_race(2, RACE_SETTINGS, got, 2.0, 0.05)
    assert not decision["continue"] and decision["ended_by"] == ONE_LEFT and decision["why"].startswith("a is")


def test_survivors_within_the_smallest_effect_of_the_best_tie():
    rows = sweep_rows({"a": 0.0, "b": 0.0, "c": 0.0}, {"a": 3, "b": 3, "c": 3}, 0.003, jitter=0.005)
    got = judge_rows(rows, ["a", "b", "c"], 0.05, 3)
    assert got["dropped"] == [] and got["tied"], got["against"]
    decision = decide_race(3, RACE_SETTINGS, got, 3.0, 0.05)
    assert not decision["continue"] and decision["ended_by"] == TIE
    record = race_record(rows, [{"round": 3, "race": got, **decision}], 0.05, False)
    assert sorted([record["winner"], *record["tied_with"]]) == ["a", "b", "c"]
    assert sorted(h["outcome"] for h in record["history"]) == [TIED, TIED, WON]


def test_a_noisy_race_is_no_tie_and_goes_on_until_the_budget_is_spent():
    rows = sweep_rows({"a": 0.0, "b": 0.02}, {"a": 2, "b": 2}, 0.06, seed=3)
    got = judge_rows(rows, ["a", "b"], 0.05, 2)
    assert got["dropped"] == [] and not got["tied"], got["against"]
    assert decide_race(2, RACE_SETTINGS, got, 2.0, 0.05)["continue"]
    spent = decide_race(4, RACE_SETTINGS, got, 2.0, 0.05)
    assert spent["ended_by"] == BUDGET and "still racing: a, b" in spent["why"]
    record = race_record(rows, [{"round": 4, "race": got, **spent}], 0.05, False)
    assert record["tied_with"] == [] and not record["decided"]
    assert {h["config"]: h["outcome"] for h in record["history"]} == {
        record["winner"]: LEADING, ({"a", "b"} - {record["winner"]}).pop(): RACING}
    by_time = decide_race(2, RoundSettings(max_launches=9, max_minutes=5, mode=RACE), got, 6.0, 0.05)
    assert not by_time["continue"] and by_time["ended_by"] == BUDGET and "5 min" in by_time["why"]


def test_a_failed_survivor_leaves_the_race():
    rows = sweep_rows({"a": 0.0, "b": 0.0}, {"a": 2, "b": 2}, 0.01)
    for r in rows:
        if r["config"] == "b":
            r["status"] = "failed"
    got = judge_rows(rows, ["a", "b"], 0.05, 2)
    assert got["failed"] == ["b"] and got["survivors"] == ["a"]
    decision = decide_race(2, RACE_SETTINGS, got, 1.0, 0.05)
    assert decision["ended_by"] == ONE_LEFT and "b (failed)" in decision["why"]
    record = race_record(rows, [{"round": 2, "race": got, **decision}], 0.05, False)
    assert {h["config"]: (h["outcome"], h["round"]) for h in record["history"]} == {"a": (WON, 2), "b": (FAILED, 2)}
    assert decide_race(2, RACE_SETTINGS, {**got, "survivors": []}, 1.0, 0.05)["ended_by"] == NOT_COMPARABLE


def test_a_sweep_ignores_the_race_and_judges_its_comparisons():
    rows = sweep_rows({"a": 0.0, "slow": 0.4}, {"a": 2, "slow": 2}, 0.01)
    got = judge_rows(rows, ["a", "slow"], 0.05, 2)
    decision = decide(2, 2, RoundSettings(max_launches=4), [], None, None, 2.0, [], 0.05, got)
    assert decision["ended_by"] == "resolved"


def test_the_answer_names_the_winner_its_verdicts_the_history_and_the_launches_spent():
    """Round 1 and 2 for all (planned), ``slow`` dropped after round 2, a and b race on in rounds 3 and 4."""
    rounds = {"a": 4, "b": 4, "slow": 2}
    slowdowns = {"a": 0.0, "b": 0.04, "slow": 0.4}
    judgements = []
    for r in (2, 3, 4):
        rows = sweep_rows(slowdowns, {n: min(k, r) for n, k in rounds.items()}, 0.015, seed=1)
        racing = [n for n in slowdowns if rounds[n] >= r]
        standing = judge_rows(rows, racing, 0.05, r)
        judgements.append({"round": r, "race": standing, **decide_race(r, RACE_SETTINGS, standing, 1.0, 0.05)})
        if not judgements[-1]["continue"]:
            break
    assert judgements[0]["race"]["dropped"] == ["slow"]
    assert judgements[-1]["ended_by"] == ONE_LEFT, judgements[-1]["why"]
    record = race_record(rows, judgements, 0.05, False)
    assert record["winner"] == "a" and record["tied_with"] == []
    assert {a["config"]: a["verdict"] for a in record["against"]} == {"b": "faster", "slow": "faster"}
    history = {h["config"]: (h["outcome"], h["round"]) for h in record["history"]}
    dropped_b = judgements[-1]["round"]
    assert history == {"a": (WON, dropped_b), "b": (DROPPED, dropped_b), "slow": (DROPPED, 2)}
    cost = record["launches"]
    assert cost["spent"] == 2 + 2 * dropped_b and cost["per_configuration"]["slow"] == 2
    assert cost["launches_needed"] is not None and cost["full_design"] == 3 * max(cost["launches_needed"], 2)
    assert race_record(rows, [{"round": 2, "race": None}], 0.05, False) is None


def test_the_report_gives_the_race_and_draws_it(tmp_path: Path):
    """report.json's race and report.md's section, rendered from the summaries and the rounds' judgements."""
    slowdowns, rounds = {"nospec": 0.0, "b": 0.04, "slow": 0.4}, {"nospec": 4, "b": 4, "slow": 2}
    judgements = []
    for r in (1, 2, 3, 4):
        rows = sweep_rows(slowdowns, {n: min(k, r) for n, k in rounds.items()}, 0.015, seed=1)
        standing = judge_rows(rows, [n for n in slowdowns if rounds[n] >= r], 0.05, r, dropping=r >= 2)
        judgements.append({"round": r, "race": standing,
                           **decide(r, 2, RACE_SETTINGS, [], None, None, 1.0, [], 0.05, standing)})
        if not judgements[-1]["continue"]:
            break
    ran = judgements[-1]["round"]
    summaries = sweep_summaries(slowdowns, {n: min(k, ran) for n, k in rounds.items()}, 0.015, seed=1)
    report = render_summaries(summaries, "nospec", tmp_path / "summary.csv", tmp_path / "report.md",
                              tmp_path / "plots", sweep={"smallest_effect": 0.05, "aa_control": False,
                                                         "rounds": {"plans": [], "judgements": judgements}})
    race = report["race"]
    assert race["winner"] == "nospec" and race["decided"] and race["ended_by"] == ONE_LEFT
    assert [s["round"] for s in race["rounds"]] == [1, 2, 3, 4][:len(judgements)]
    md = (tmp_path / "report.md").read_text()
    section = md.split("## Race (at point default)", 1)[1].split("\n## ", 1)[0]
    assert "**Winner: nospec**" in section and "| slow | dropped in round 2 |" in section, section
    assert f"**{race['launches']['spent']}** spent, against **{race['launches']['full_design']}**" in section
    assert (tmp_path / "plots" / "race.png").stat().st_size > 10_000
    from specsweep.workflow.closing import closing_lines
    assert f"Race: nospec won (one left); {race['launches']['spent']} launches of" in "\n".join(closing_lines(tmp_path))
    plain = render_summaries(summaries, "nospec", tmp_path / "p.csv", tmp_path / "plain" / "report.md",
                             tmp_path / "plain" / "plots", sweep={"smallest_effect": 0.05})
    assert plain["race"] is None and "## Race" not in (tmp_path / "plain" / "report.md").read_text()
    assert not (tmp_path / "plain" / "plots" / "race.png").exists()


# ------------------------------------------------------------------ many synthetic races


def _race(rng: np.random.Generator, slowdowns: dict[str, float], launch_sd: float, effect: float, planned: int,
          budget: int) -> tuple[str | None, str, int]:
    """One race on synthetic launch medians (the round a shared random effect, each launch its own):
    ``standings`` after each round from ``planned`` on, until one is left, a tie or ``budget`` rounds.
    Returns the winner (the best of the last survivors), what ended it and the launches spent."""
    from specsweep.analysis import stats as S
    from specsweep.analysis.blocks import fit_point
    from specsweep.analysis.race import best_of, standings

    values: dict[str, dict[str, float]] = {name: {} for name in slowdowns}
    survivors, spent = sorted(slowdowns), 0
    for r in range(1, budget + 1):
        shift = rng.normal(0, launch_sd)
        for name in survivors:
            values[name][str(r)] = math.exp(-math.log1p(slowdowns[name]) + shift + rng.normal(0, launch_sd))
            spent += 1
        sides = {n: S.Sample([v for v in by.values() for _ in range(12)], [lid for lid in by for _ in range(12)])
                 for n, by in values.items()}
        fit = fit_point(sides, {n: [{"launch": lid} for lid in by] for n, by in values.items()})
        if r < planned:
            continue
        got = standings(fit, survivors, effect, r)
        survivors = got["survivors"]
        if len(survivors) == 1:
            return survivors[0], ONE_LEFT, spent
        if got["tied"]:
            return got["best"], TIE, spent
    return best_of(fit, survivors), BUDGET, spent


def test_over_many_races_the_winner_is_rarely_worse_than_the_best_by_more_than_the_effect():
    """16 configurations 0, 2, ..., 30 % slower than the best, launch SD 2 %, the effect 5 %, two planned rounds,
    a budget of 8: a winner worse than the true best by more than 5 % in at most 5 % of the races (Monte Carlo
    error: one-sided 99 %), and the launches spent well under the full design's."""
    rng = np.random.default_rng(2026)
    slowdowns = {f"c{k:02d}": 0.02 * k for k in range(16)}
    races = 200
    wrong, spent_all, ends = 0, [], {}
    for _ in range(races):
        winner, ended, spent = _race(rng, slowdowns, 0.02, 0.05, 2, 8)
        wrong += winner is None or slowdowns[winner] > 0.05
        spent_all.append(spent)
        ends[ended] = ends.get(ended, 0) + 1
    assert wrong / races <= 0.05 + 2.33 * math.sqrt(0.05 * 0.95 / races), (wrong, ends)
    # the full design: 16 configurations in the launches that see 5 % at 80 % power with this variance, at the
    # level of the best against each of the 15 others, at that design's own degrees of freedom
    from specsweep.analysis.race import family_level, full_design_df
    from specsweep.analysis.stats import launches_needed_in
    needed = launches_needed_in(0.02 ** 2, 0.05, lambda n: full_design_df(16, n), family_level(16))
    print(f"races: {ends}; wrong winners {wrong}/{races}; launches {statistics.mean(spent_all):.1f} on average "
          f"against {16 * needed} for the full design ({needed} each)")
    assert statistics.mean(spent_all) < 16 * needed, (statistics.mean(spent_all), needed, ends)


def test_a_race_winner_wins_its_grid():
    """A grid's exported winner is the race's (judged by the verdicts' model), not the member with the highest
    decode rate (a member dropped early has its rate from fewer, earlier rounds)."""
    from specsweep.analysis.grids import best_of_grids
    from specsweep.analysis.metrics import BASELINE_TOK_S
    from specsweep.analysis.rows import compare_rows

    rows = sweep_rows({"g-x": 0.0, "g-y": 0.0}, {"g-x": 2, "g-y": 2}, 0.01)
    grids = {"g": {"members": {"g-x": {"env.X": "x"}, "g-y": {"env.X": "y"}}, "axes": [{"keys": ["env.X"]}]}}
    slower = min(rows, key=lambda r: r[BASELINE_TOK_S])["config"]
    assert best_of_grids(rows, grids, compare_rows)[0].winner["config"] != slower
    assert best_of_grids(rows, grids, compare_rows, race_winner=slower)[0].winner["config"] == slower


def test_while_nothing_can_be_compared_there_is_no_best():
    """Round 1 of a small workload: fewer requests a side than a verdict needs (``min_samples``)."""
    from specsweep.analysis.metrics import PRIMARY_VERDICT
    from specsweep.analysis.race import standings

    rows = sweep_rows({"a": 0.0, "slow": 0.4}, {"a": 1, "slow": 1}, 0.01)
    fit = rows[0]["blocks"][PRIMARY_VERDICT]
    assert standings(fit, ["a", "slow"], 0.05, 1, dropping=False)["best"] == "a"
    got = standings(fit, ["a", "slow"], 0.05, 1, dropping=False, min_samples=1000)
    assert got["best"] is None and got["against"] == [] and got["survivors"] == ["a", "slow"] and not got["tied"]


def test_the_screen_is_part_of_the_race_answer_and_of_its_section(tmp_path: Path):
    """A screen before the race (``analysis.screen``): its set-aside configuration was never launched, its history
    is ``screened out`` with the prediction, the full design counts it, and report.md gives the margin, what was
    set aside and each prediction; a screen that set nothing aside says why."""
    from specsweep.analysis.race import SCREENED
    from specsweep.analysis.screen import screen

    slowdowns, rounds = {"nospec": 0.0, "b": 0.4}, {"nospec": 2, "b": 2}
    summaries = sweep_summaries(slowdowns, rounds, 0.01, seed=2)
    rows = sweep_rows(slowdowns, rounds, 0.01, seed=2)
    measured = [{"config": "nospec", "point_index": 0, "status": "ok",
                 "model": {"parts": {"fixed_ms": 10.0, "allreduces": 16, "latency_us": 50.0, "tokens": 1.0},
                           "residual": {"residual_share": 0.05}}}]
    groups = {"nospec": ["b", "nospec", "nospec-gloo"]}
    latencies = {"nospec": 50.0, "b": 50.0, "nospec-gloo": 400.0}
    record = screen(groups, ["server_args.all-reduce-backend"], measured, latencies, 0.15, benches=2)
    assert record["set_aside"] == ["nospec-gloo"]
    standing = judge_rows(rows, ["b", "nospec"], 0.05, 2)
    judgement = {"round": 2, "race": standing, **decide_race(2, RACE_SETTINGS, standing, 1.0, 0.05)}
    race = race_record(rows, [judgement], 0.05, False, record)
    history = {h["config"]: h for h in race["history"]}
    assert history["nospec-gloo"]["outcome"] == SCREENED and history["nospec-gloo"]["round"] == 0
    assert history["nospec-gloo"]["verdict"]["predicted_ms"] == pytest.approx(10 + 16 * 0.4)
    cost = race["launches"]
    assert cost["screened_out"] == ["nospec-gloo"] and cost["spent"] == 4
    assert cost["full_design"] == 3 * max(cost["launches_needed"], 2), "the full design launches it too"
    report = render_summaries(summaries, "nospec", tmp_path / "s.csv", tmp_path / "report.md", tmp_path / "plots",
                              sweep={"smallest_effect": 0.05, "aa_control": False, "screen": record,
                                     "rounds": {"plans": [], "judgements": [judgement]}})
    assert report["race"]["screen"]["set_aside"] == ["nospec-gloo"]
    section = (tmp_path / "report.md").read_text().split("## Race", 1)[1].split("\n## ", 1)[0]
    assert "**set aside: nospec-gloo**" in section and "the model's error on this host is 5 %" in section, section
    assert "predicted more than 10.5 % slower than the predicted best (nospec)" in section
    assert "| nospec-gloo | nospec | 400.0 | 16.40 | 61.0 | +51.9 % | set aside |" in section, section
    assert "| nospec-gloo | screened out (predicted +51.9 %) |" in section
    from specsweep.workflow.closing import closing_lines
    assert "; 1 screened out by the cost model." in "\n".join(closing_lines(tmp_path))
    assert "(every one of the 3 configurations, the 1 screened out included, in " in section
    unvalidated = screen(groups, ["server_args.all-reduce-backend"], [], latencies, 0.15)
    render_summaries(summaries, "nospec", tmp_path / "u.csv", tmp_path / "u" / "report.md", tmp_path / "u" / "plots",
                     sweep={"smallest_effect": 0.05, "aa_control": False, "screen": unvalidated,
                            "rounds": {"plans": [], "judgements": [judgement]}})
    assert "**nothing set aside**: no configuration measured yet" in (tmp_path / "u" / "report.md").read_text()


def test_a_check_run_launches_the_set_aside_once_outside_the_race_and_says_how_far_each_prediction_was_off(
        tmp_path: Path):
    """``screen.check``: the set-aside configuration is launched once (round 1), never races, and the report gives
    its prediction against what was measured, whether it really was slower than the winner, and its launch apart
    from the race's; the full design counts it once."""
    from specsweep.analysis.race import SCREENED
    from specsweep.analysis.screen import check_record, screen
    from specsweep.workflow.closing import closing_lines

    slowdowns, rounds = {"nospec": 0.0, "b": 0.04, "nospec-gloo": 0.5}, {"nospec": 2, "b": 2, "nospec-gloo": 1}
    summaries = sweep_summaries(slowdowns, rounds, 0.01, seed=2)
    rows = sweep_rows(slowdowns, rounds, 0.01, seed=2)
    measured = [{"config": "nospec", "point_index": 0, "status": "ok",
                 "model": {"parts": {"fixed_ms": 10.0, "allreduces": 16, "latency_us": 50.0, "tokens": 1.0},
                           "residual": {"residual_share": 0.05}}}]
    record = screen({"nospec": ["b", "nospec", "nospec-gloo"]}, ["server_args.all-reduce-backend"], measured,
                    {"nospec": 50.0, "b": 50.0, "nospec-gloo": 400.0}, 0.15, benches=2)
    assert record["set_aside"] == ["nospec-gloo"]
    standing = judge_rows(rows, ["b", "nospec"], 0.05, 2)  # round 2's members: the checked one is not among them
    assert "nospec-gloo" not in standing["survivors"] + standing["dropped"]
    judgement = {"round": 2, "race": standing, **decide_race(2, RACE_SETTINGS, standing, 1.0, 0.05)}
    race = race_record(rows, [judgement], 0.05, False, record)
    cost = race["launches"]
    assert cost["checked"] == {"nospec-gloo": 1} and cost["check_spent"] == 1
    assert cost["spent"] == 4 and "nospec-gloo" not in cost["per_configuration"], "the check is not the race's"
    assert cost["screened_out"] == ["nospec-gloo"]
    assert cost["full_design"] == 3 * max(cost["launches_needed"], 2), "every configuration once, the checked too"
    history = {h["config"]: h for h in race["history"]}
    assert history["nospec-gloo"]["outcome"] == SCREENED and race["winner"] != "nospec-gloo"
    [check] = race["screen_check"]
    assert check["config"] == "nospec-gloo" and check["launches"] == 1 and check["winner"] == race["winner"]
    assert check["really_slower"] and check["slower_by"] == pytest.approx(0.5 / (1 + slowdowns[race["winner"]]),
                                                                          abs=0.08)
    assert check["predicted_tok_s"] == pytest.approx(1e3 / 16.4)
    assert check["off_by"] is None and check["why"] == "not measured: its cost model", "no profile in these records"
    # measured the way the model predicts (the row's model_measured_tok_s, set by analysis.answer.annotate)
    profiled = [{**r, "model_measured_tok_s": 50.0} if r["config"] == "nospec-gloo" else r for r in rows]
    [got] = check_record(record, profiled, race["winner"], race["against"])
    assert got["off_by"] == pytest.approx((50.0 - 1e3 / 16.4) / 50.0) and got["why"] is None
    # check off: the set-aside configuration has no row, and the check says it was never launched
    kept = [r for r in rows if r["config"] != "nospec-gloo"]
    [never] = race_record(kept, [judgement], 0.05, False, record)["screen_check"]
    assert never["launches"] == 0 and never["really_slower"] is None and "screen.check: false" in never["why"]
    assert race_record(kept, [judgement], 0.05, False, record)["launches"]["full_design"] == cost["full_design"]

    report = render_summaries(summaries, "nospec", tmp_path / "s.csv", tmp_path / "report.md", tmp_path / "plots",
                              sweep={"smallest_effect": 0.05, "aa_control": False, "screen": record,
                                     "rounds": {"plans": [], "judgements": [judgement]}})
    assert report["race"]["screen_check"][0]["config"] == "nospec-gloo"
    section = (tmp_path / "report.md").read_text().split("## Race", 1)[1].split("\n## ", 1)[0]
    winner = race["winner"]
    assert f"**1 of 1 really slower than the winner ({winner})**" in section, section
    assert "| nospec-gloo | 1 | 61.0 | n/a | n/a |" in section and "| yes (not measured: its cost model) |" in section
    assert "Launches: **4** spent (and 1 more launching the 1 set-aside configurations to check the screen, " \
           "not the race's), against" in section, section
    assert "(every one of the 3 configurations, the 1 screened out included, in " in section
    assert "| nospec-gloo | screened out (predicted +51.9 %) |" in section and "(the screen's check)" in section
    assert "(1 launched to check it, 1 launches: 1 really slower than the winner)." in "\n".join(
        closing_lines(tmp_path))


def test_a_configuration_launched_to_check_the_screen_never_races(monkeypatch, tmp_path: Path):
    """With one planned round its judgement is the race's first: the configuration the check run launched in it
    (``outside_race``, ``workflow.inputs.judge_params``) is measured, never a survivor, however fast it is."""
    import io

    from specsweep.workflow import jobs
    from specsweep.workflow.rounds import judge_round

    slowdowns, launched = {"nospec": 0.0, "b": 0.3, "fast": -0.3}, {"nospec": 3, "b": 3, "fast": 1}
    by_name = {s.config: s for s in sweep_summaries(slowdowns, launched, 0.01, seed=3)}
    monkeypatch.setattr(jobs, "summary_of_files", lambda inputs, *_: by_name[inputs["plan"][0].split("/")[1]])
    rounds = [[("nospec", "1"), ("b", "1"), ("fast", "1")], [("nospec", "2"), ("b", "2")],
              [("nospec", "3"), ("b", "3")]]
    params = {"rounds": RACE_SETTINGS.as_dict(), "smallest_effect": 0.05, "baseline": "nospec",
              "positive_control": None, "launches": {"nospec": 1, "b": 1, "fast": 1}, "aa_control": False,
              "plans": {n: "0" * 12 for n in slowdowns}, "outside_race": ["fast"]}
    got = judge_round(3, rounds, params, str(tmp_path / "judgement.json"), io.StringIO())
    assert got["race"]["best"] == "nospec" and "fast" not in got["race"]["survivors"], got["race"]
    first = judge_round(1, rounds, params, str(tmp_path / "judgement-1.json"), io.StringIO())
    assert "fast" not in first["race"]["survivors"] + first["race"]["unmeasured"], first["race"]
    params.pop("outside_race")
    assert "fast" in judge_round(1, rounds, params, str(tmp_path / "j.json"), io.StringIO())["race"]["survivors"]


def test_with_the_baseline_launched_4_times_in_round_one_the_race_drops_after_round_one():
    """``launches: 1`` and ``rounds.first_round_baseline: 4``: round 1 holds a (the baseline) as launches 1, 1b,
    1c, 1d and its A/A control, b and slow once. The one-way model judges round 1 on the variance of a's 5
    launches (4 degrees of freedom) and drops slow (40 % slower); b (within 1 %) races on."""
    from specsweep.analysis.metrics import PRIMARY_VERDICT
    from specsweep.analysis.race import family_level, full_design_df
    from specsweep.analysis.stats import launches_needed, launches_needed_in

    rng = np.random.default_rng(3)
    factor = {"a": 1.0, "b": 1.01, "slow": 1.4}
    launches = {"a": ["1", "1b", "1c", "1d", "aa"], "b": ["1"], "slow": ["1"]}
    order = rng.permutation([(n, lid) for n, ids in launches.items() for lid in ids])
    starts = {n: {} for n in launches}
    for minute, (name, lid) in enumerate(order):
        starts[name][lid] = (minute, factor[name] * math.exp(rng.normal(0, 0.01)))
    summaries = [launches_summary(n, 12.0, s, 100 + 7 * len(n)) for n, s in starts.items()]
    rows, _ = config_rows(explode_points(summaries), "a", 0.05)
    standing = judge_rows(rows, ["a", "b", "slow"], 0.05, 1, dropping=True)
    assert standing["model"] == "one-way" and standing["dropped"] == ["slow"], standing
    assert set(standing["survivors"]) == {"a", "b"} and standing["best"] in ("a", "b")
    settings = RoundSettings(max_launches=4, mode=RACE, first_round_baseline=4)
    decision = decide(1, 1, settings, [], "a", None, 1.0, [], 0.05, standing)
    assert decision["continue"] and decision["next"] == [["a", "2"], ["b", "2"]], decision
    record = race_record(rows, [{"round": 1, "race": standing, **decision}], 0.05, True)
    assert {h["config"]: (h["outcome"], h["round"]) for h in record["history"]}["slow"] == (DROPPED, 1)
    cost = record["launches"]
    assert cost["spent"] == 7 and cost["per_configuration"] == {"a": 5, "b": 1, "slow": 1}
    # the full design: every configuration in the launches that see 5 % at the t quantiles of that design's own
    # degrees of freedom ((3 - 1)(n - 1)), not of this run's 4
    fit = rows[0]["blocks"][PRIMARY_VERDICT]
    level = family_level(3)
    needed = launches_needed_in(fit.noise.var, 0.05, lambda n: full_design_df(3, n), level)
    assert cost["launches_needed"] == needed and cost["full_design"] == 3 * max(needed, 1) + 1
    assert full_design_df(3, needed) >= 2 and needed >= 2
    assert needed <= launches_needed(fit.noise, 0.05, level), "this run's fewer degrees of freedom ask for more"


def test_the_launches_a_design_needs_come_from_its_own_degrees_of_freedom():
    from specsweep.analysis.stats import launches_needed_in

    # 2 x var x ((t(0.975, df) + t(0.8, df)) / log(1.05))^2 at var = 0.02^2: about 2.7 at large df, so 3 launches
    # a side where the design with n launches has 100 (n - 1) degrees of freedom ...
    assert launches_needed_in(0.02 ** 2, 0.05, lambda n: 100 * (n - 1)) == 3
    # ... and more where it has n - 1 (t(0.975, 2) = 4.3: 2 x 4e-4 x ((4.3 + 1.06) / 0.0488)^2 = 9.6 > 3)
    assert launches_needed_in(0.02 ** 2, 0.05, lambda n: n - 1) > 3
    assert launches_needed_in(None, 0.05, lambda n: n) is None and launches_needed_in(1e-4, 0.0, lambda n: n) is None
