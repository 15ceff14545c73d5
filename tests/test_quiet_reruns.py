"""The suite's phases: a quiet test that fails runs again, visibly, and no other does; a test in
the side-by-side phase gets the busy machine's slack."""

from __future__ import annotations

import pytest
from machine_load import SIDE_BY_SIDE_ENV

# No skip without pytest-rerunfailures: it is in the test extras, and without it the
# conftest's rule would do nothing, which these tests must then say by failing.

TESTS = '''
import pytest

TRIES = {"stall": 0, "wrong": 0, "plain": 0}

@pytest.mark.quiet
def test_stalled_once():
    TRIES["stall"] += 1
    assert TRIES["stall"] > 1, "a stall on the first try"

@pytest.mark.quiet
def test_wrong_every_time():
    TRIES["wrong"] += 1
    assert False, f"try {TRIES['wrong']}"

def test_not_quiet():
    TRIES["plain"] += 1
    assert False, f"try {TRIES['plain']}"
'''


class TestQuietReruns:
    """Quiet tests get two more tries, reported; a fault that repeats still fails."""

    def test_a_stall_passes_on_its_rerun_and_a_repeated_fault_fails(
            self, own_suite: pytest.Pytester) -> None:
        """One stall: passed after one rerun; a wrong figure: failed after three tries."""
        own_suite.makepyfile(test_timing=TESTS)
        result = own_suite.runpytest_subprocess("-p", "no:cacheprovider", "-rfR",
                                               "--quiet-tests=only")
        outcomes = result.parseoutcomes()
        assert (outcomes["passed"], outcomes["failed"], outcomes["rerun"]) == (1, 1, 3)
        result.stdout.fnmatch_lines(["*RERUN*test_stalled_once*",
                                     "*RERUN*test_wrong_every_time*",
                                     "*FAILED*test_wrong_every_time*try 3*"])

    def test_other_tests_are_never_rerun(self, own_suite: pytest.Pytester) -> None:
        """A test not marked quiet fails on its first try."""
        own_suite.makepyfile(test_timing=TESTS)
        result = own_suite.runpytest_subprocess("-p", "no:cacheprovider", "-rfR",
                                               "--quiet-tests=skip")
        outcomes = result.parseoutcomes()
        assert outcomes["failed"] == 1 and "rerun" not in outcomes
        result.stdout.fnmatch_lines(["*FAILED*test_not_quiet*try 1*"])


class TestSideBySideSlack:
    """The side-by-side phase counts as a busy machine, in the tests and what they start;
    the quiet phase is not marked so."""

    @pytest.mark.parametrize(("phase", "passed", "deselected"), [
        ("skip", 2, 1),  # marked: busy_slack() is the busy one, in a subprocess too
        ("only", 1, 2),  # not marked: the tight bounds hold on a quiet machine
    ])
    def test_only_the_side_by_side_phase_is_marked(
            self, own_suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch, phase: str,
            passed: int, deselected: int) -> None:
        """--quiet-tests=skip marks its processes busy; --quiet-tests=only does not."""
        # This test runs in a phase itself: the outer suite's mark must not decide.
        monkeypatch.delenv(SIDE_BY_SIDE_ENV, raising=False)
        own_suite.makepyfile(test_timing=SLACK_TESTS)
        result = own_suite.runpytest_subprocess("-p", "no:cacheprovider",
                                                f"--quiet-tests={phase}")
        result.assert_outcomes(passed=passed, deselected=deselected)


SLACK_TESTS = '''
import os
import subprocess
import sys

import pytest

from machine_load import SIDE_BY_SIDE_ENV, busy_slack

def test_here():
    assert os.environ.get(SIDE_BY_SIDE_ENV) == "1" and busy_slack() == 0.15

def test_in_a_subprocess():
    code = ("import os; from machine_load import SIDE_BY_SIDE_ENV, busy_slack; "
            "print(os.environ.get(SIDE_BY_SIDE_ENV), busy_slack())")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True).stdout
    assert out.split() == ["1", "0.15"]

@pytest.mark.quiet
def test_not_marked():
    assert SIDE_BY_SIDE_ENV not in os.environ
'''


QUIET_AND_NOT = '''
import pytest

@pytest.mark.quiet
def test_timed():
    pass

def test_plain():
    pass
'''


class TestQuietPhaseCollection:
    """The quiet phase imports only the test files that say ``mark.quiet``; a quiet test
    marked from elsewhere stops every phase with a usage error instead of running in none."""

    def test_files_without_quiet_tests_are_not_imported(self, own_suite: pytest.Pytester) -> None:
        """A file that cannot even be imported is no error to the quiet phase."""
        own_suite.makepyfile(test_timing=QUIET_AND_NOT,
                             test_plain="raise RuntimeError('imported')\n")
        quiet = own_suite.runpytest_subprocess("-p", "no:cacheprovider", "--quiet-tests=only")
        quiet.assert_outcomes(passed=1, deselected=1)
        busy = own_suite.runpytest_subprocess("-p", "no:cacheprovider", "--quiet-tests=skip")
        busy.assert_outcomes(errors=1)

    def test_a_quiet_mark_from_elsewhere_is_a_usage_error(self, own_suite: pytest.Pytester) -> None:
        """Marked through an imported name: the file never says so, and no phase runs."""
        own_suite.makepyfile(marks="import pytest\nQUIET = pytest.mark.quiet\n",
                             test_hidden="from marks import QUIET\n\n"
                                         "@QUIET\ndef test_timed():\n    pass\n")
        for phase in ("skip", "include"):
            result = own_suite.runpytest_subprocess("-p", "no:cacheprovider",
                                                    f"--quiet-tests={phase}")
            assert result.ret == pytest.ExitCode.USAGE_ERROR
            result.stderr.fnmatch_lines(["*test_timed is marked quiet but test_hidden.py "
                                         "never says 'mark.quiet'*"])
