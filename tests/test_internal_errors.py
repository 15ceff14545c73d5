"""The suite's rule on internal errors: one the program never saw still fails its test."""

from __future__ import annotations

import pytest

from agent_latency import _log

TESTS = '''
from agent_latency import _log

def _fail_inside(place):
    try:
        raise ValueError("a bug of ours")
    except ValueError:
        _log.internal_error(place)

def test_provoked_on_purpose():
    _log.FAULTS.add("x")
    try:
        _fail_inside("x")
    finally:
        _log.FAULTS.discard("x")

def test_real_failure_at_the_same_place():
    _fail_inside("x")  # logged once per place: the log alone stays silent
'''


class TestInternalErrorsFailTests:
    """An internal error fails the test that caused it unless the test expects it."""

    def test_real_failure_after_a_provoked_one(self, own_suite: pytest.Pytester) -> None:
        """A bug at a place a fault test already provoked is not silent."""
        own_suite.makepyfile(test_places=TESTS)
        result = own_suite.runpytest_subprocess("-p", "no:cacheprovider")
        # Reported where the test's fixtures end: an error of that test, not a pass.
        result.assert_outcomes(passed=2, errors=1)
        result.stdout.fnmatch_lines(["*ERROR at teardown of test_real_failure_at_the_same_place*",
                                     "internal error(s) of agent-latency in*x*"])


    @pytest.mark.internal_errors
    def test_marked_tests_may(self) -> None:
        """The ``internal_errors`` marker allows them."""
        try:
            raise ValueError("expected")
        except ValueError:
            _log.internal_error("test.marked")


class TestGuard:
    """``Guard``: a failure inside is logged and swallowed, an armed place fails at the start."""

    @pytest.mark.internal_errors
    def test_swallows_and_reports(self, caplog: pytest.LogCaptureFixture) -> None:
        """The function's exception never reaches the caller, who gets the default."""
        @_log.Guard("test.guard.swallow", default=-1)
        def broken() -> int:
            raise RuntimeError("inside")

        assert broken() == -1
        assert "test.guard.swallow" in caplog.text

    def test_armed_place_fails_where_it_starts(self) -> None:
        """An armed place fails before the body runs, and is swallowed like any failure."""
        reached: list[bool] = []

        @_log.Guard("test.guard.armed")
        def body() -> None:
            reached.append(True)

        _log.FAULTS.add("test.guard.armed")
        try:
            assert body() is None
        finally:
            _log.FAULTS.discard("test.guard.armed")
        assert reached == []
        body()
        assert reached == [True]

    def test_lets_base_exceptions_through(self) -> None:
        """KeyboardInterrupt and the like are the program's, not ours to swallow."""
        @_log.Guard("test.guard.base")
        def interrupted() -> None:
            raise KeyboardInterrupt

        with pytest.raises(KeyboardInterrupt):
            interrupted()

    @pytest.mark.internal_errors
    def test_inject_and_report(self, caplog: pytest.LogCaptureFixture) -> None:
        """The hot path's form: armed, ``inject`` raises; ``report`` logs under the place."""
        guard = _log.Guard("test.guard.inline")
        _log.FAULTS.add("test.guard.inline")
        try:
            with pytest.raises(_log.InjectedFault):
                guard.inject()
        finally:
            _log.FAULTS.discard("test.guard.inline")
        guard.inject()
        try:
            raise ValueError("inline")
        except ValueError:
            guard.report()
        assert "test.guard.inline" in caplog.text
