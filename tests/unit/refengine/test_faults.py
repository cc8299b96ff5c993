"""The reference engine's test-only fault: a fixed delay per step, per launch."""

import pytest

from specsweep.refengine.faults import LAUNCH_ENV, STEP_DELAY_ENV, step_delay_s
from specsweep.serve.job import LAUNCH_ENV as JOB_LAUNCH_ENV


def test_the_job_and_the_engine_name_the_launch_variable_alike():
    assert LAUNCH_ENV == JOB_LAUNCH_ENV


@pytest.mark.parametrize("value, launch, delay", [
    (None, "1", 0.0), ("", "1", 0.0), ("0.004", "1", 0.004), ("0.004", "aa", 0.004),
    ("aa=0.05", "aa", 0.05), ("aa=0.05", "1", 0.0), ("1=0.01, aa=0.05", "1", 0.01),
])
def test_delay_per_launch(value, launch, delay):
    env = {LAUNCH_ENV: launch} | ({STEP_DELAY_ENV: value} if value is not None else {})
    assert step_delay_s(env) == pytest.approx(delay)


@pytest.mark.parametrize("value", ["fast", "aa", "aa=x", "=0.1", "-1", "11"])
def test_malformed_delay_is_an_error(value):
    with pytest.raises(ValueError, match=STEP_DELAY_ENV):
        step_delay_s({STEP_DELAY_ENV: value, LAUNCH_ENV: "1"})
