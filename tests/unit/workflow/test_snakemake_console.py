"""Snakemake's own console lines: quiet by the shipped profile, the chatter it prints regardless dropped,
everything after a Ctrl-C dropped, and --verbose (or a dry run) bringing all of it back."""

from __future__ import annotations

import io
import logging
import signal

import pytest
import yaml
from snakemake.settings.enums import Quietness

from specsweep.testing.workflow import REPO
from specsweep.workflow.console import STREAM_HANDLER, quiet_console


def _logger() -> tuple[logging.Logger, io.StringIO]:
    logger = logging.getLogger(f"specsweep-test-{id(object())}")
    logger.setLevel(logging.INFO)  # as Snakemake sets its own
    logger.propagate = False
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.name = STREAM_HANDLER
    logger.addHandler(handler)
    return logger, stream


def _profile_quiet() -> set:
    profile = yaml.safe_load((REPO / "profiles/default/config.yaml").read_text())
    return Quietness.parse_choices_set(profile["quiet"])


@pytest.fixture
def sigint():
    before = signal.getsignal(signal.SIGINT)
    yield
    signal.signal(signal.SIGINT, before)


def test_the_shipped_profile_quiets_banners_progress_and_the_header():
    assert _profile_quiet() == {Quietness.RULES, Quietness.PROGRESS, Quietness.HOST}


def test_the_chatter_goes_and_specsweep_and_errors_stay(sigint):
    logger, stream = _logger()
    console = quiet_console(logger, _profile_quiet(), verbose=False, dryrun=False, argv=["--cores", "1", "all"])
    assert console is not None
    for line in ("Select jobs to execute...", "Execute 1 jobs...", "Building DAG of jobs...", "Using shell: /bin/bash",
                 "Conda environments: ignored", "DAG of jobs will be updated after completion.",
                 "Updating checkpoint dependencies.", "Complete log(s): /x/.snakemake/log/a.log",
                 "Elapsed time: 0:05:01.2"):
        logger.info(line)
    logger.error("MissingInputException: a real problem")
    assert stream.getvalue() == "MissingInputException: a real problem\n"


def test_after_ctrl_c_snakemake_adds_nothing(sigint):
    logger, stream = _logger()
    quiet_console(logger, _profile_quiet(), verbose=False, dryrun=False, argv=["all"])
    with pytest.raises(KeyboardInterrupt):
        signal.raise_signal(signal.SIGINT)
    logger.error("RuleException:\nCalledProcessError in file rules/benchmark.smk")
    logger.error("Exiting because a job execution failed. Look above for error messages")
    assert stream.getvalue() == ""


@pytest.mark.parametrize("verbose, dryrun, argv", [(True, False, ["--verbose"]), (False, True, ["-n"])])
def test_verbose_or_a_dry_run_brings_every_line_back(verbose, dryrun, argv):
    logger, stream = _logger()
    quiet = _profile_quiet()
    assert quiet_console(logger, quiet, verbose=verbose, dryrun=dryrun, argv=argv) is None
    assert quiet == set()  # the run's own set, which Snakemake's filters and formatters read
    logger.info("Select jobs to execute...")
    assert stream.getvalue() == "Select jobs to execute...\n"


def test_a_dry_run_asked_to_be_quiet_stays_quiet():
    quiet = {Quietness.RULES, Quietness.PROGRESS}
    quiet_console(logging.getLogger("specsweep-test-dry"), quiet, verbose=False, dryrun=True, argv=["-n", "--quiet"])
    assert quiet == {Quietness.RULES, Quietness.PROGRESS}
