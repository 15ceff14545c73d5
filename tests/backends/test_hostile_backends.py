"""The backend readers against a hostile local server: credentials stay with their origin,
every request has one deadline and a size cap, any unexpected answer is one line with exit
status 2, and paging ends.

The server (tests/backends/hostile_server.py) runs on loopback in the test; the readers run
as ``agent-latency report`` does, in this process (``report.main``) or, where the whole
program matters, in a child process.
"""

from __future__ import annotations

import base64
import os
import subprocess
import sys
import time

import pytest
from hostile_server import body, endless, pages, redirect, serve, trickle

from agent_latency import report
from agent_latency.report._sources import iter_source

KEY = "canary-key-7f3a9c"
PROG = "agent-latency report: "


@pytest.fixture
def server():
    with serve() as state:
        yield state


@pytest.fixture
def other():
    """A second server: another origin (another port on the same host)."""
    with serve() as state:
        yield state


def run_report(capsys, *args: str) -> tuple[int, str, str]:
    status = report.main(list(args))
    out, err = capsys.readouterr()
    return status, out, err


def assert_one_line(status: int, err: str, *words: str) -> None:
    """Exit status 2 and a single line naming what was wrong, no traceback."""
    assert status == 2, err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(PROG) and "Traceback" not in err, err
    for word in words:
        assert word in lines[0], (word, err)


EMPTY_PAGE = '{"data": [], "next_cursor": null}'


class TestCredentials:
    """PHOENIX_API_KEY goes to the origin it was given for, never to another one."""

    def test_redirect_to_another_port_drops_the_key(self, server, other, capsys,
                                                    monkeypatch):
        monkeypatch.setenv("PHOENIX_API_KEY", KEY)
        server.routes["/v1/projects/p/spans"] = redirect(
            f"http://{other.base}/v1/projects/p/spans?{{query}}")
        other.routes["/v1/projects/p/spans"] = body(EMPTY_PAGE)
        status, _, err = run_report(capsys, f"phoenix+http://{server.base}?project=p")
        assert "Traceback" not in err
        assert status == 1, err  # followed, answered, no tasks
        assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"
        assert len(other.requests) == 1  # the redirect was followed ...
        for seen in other.requests:  # ... without the key, in any header
            assert all(KEY not in value for value in seen.headers.values()), seen.headers

    def test_redirect_in_the_same_origin_keeps_it(self, server, capsys, monkeypatch):
        monkeypatch.setenv("PHOENIX_API_KEY", KEY)
        server.routes["/v1/projects/p/spans"] = redirect("/moved?{query}", status=307)
        server.routes["/moved"] = body(EMPTY_PAGE)
        status, _, err = run_report(capsys, f"phoenix+http://{server.base}?project=p")
        assert status == 1, err
        assert [s.path for s in server.requests] == ["/v1/projects/p/spans", "/moved"]
        assert server.requests[1].headers["authorization"] == f"Bearer {KEY}"

    def test_redirect_to_another_host_name_drops_it(self, server, capsys, monkeypatch):
        """``localhost`` and ``127.0.0.1`` are one machine but two origins."""
        monkeypatch.setenv("PHOENIX_API_KEY", KEY)
        server.routes["/v1/projects/p/spans"] = redirect(
            f"http://localhost:{server.port}/moved?{{query}}")
        server.routes["/moved"] = body(EMPTY_PAGE)
        status, _, err = run_report(capsys, f"phoenix+http://{server.base}?project=p")
        assert status == 1, err
        assert "authorization" not in server.requests[1].headers

    @pytest.mark.parametrize("target", ["file:///etc/passwd", "ftp://127.0.0.1/x"])
    def test_redirect_out_of_http_is_refused(self, server, capsys, target):
        server.routes["/api/traces"] = redirect(target)
        status, _, err = run_report(capsys, f"jaeger+http://{server.base}?service=s")
        assert_one_line(status, err, "not an http(s) URL")

    def test_endless_redirects_end(self, server, capsys):
        server.routes["/api/traces"] = redirect("/api/traces?{query}")
        status, _, err = run_report(capsys, f"jaeger+http://{server.base}?service=s")
        assert_one_line(status, err, "redirects")
        assert len(server.requests) <= 6

    def test_whole_program(self, server, other, tmp_path):
        """The same as the first test, in a child process as a user runs it."""
        server.routes["/v1/projects/p/spans"] = redirect(
            f"http://{other.base}/v1/projects/p/spans?{{query}}")
        other.routes["/v1/projects/p/spans"] = body(EMPTY_PAGE)
        env = {k: v for k, v in os.environ.items() if not k.startswith("AGENT_LAT")}
        env["PHOENIX_API_KEY"] = KEY
        result = subprocess.run(
            [sys.executable, "-m", "agent_latency", "report",
             f"phoenix+http://{server.base}?project=p"], cwd=tmp_path, env=env,
            capture_output=True, text=True, timeout=60)
        assert "Traceback" not in result.stderr and result.returncode == 1, result.stderr
        assert other.requests and all(
            KEY not in v for s in other.requests for v in s.headers.values())


    def test_a_password_in_the_url_is_sent_never_shown(self, server, capsys):
        server.routes["/api/traces"] = body("who are you", 401)
        status, _, err = run_report(capsys,
                                    f"jaeger+http://me:hunter2@{server.base}?service=s")
        assert_one_line(status, err, "HTTP 401", f"http://{server.base}/api/traces")
        assert "hunter2" not in err and "me:" not in err
        token = base64.b64encode(b"me:hunter2").decode()
        assert server.requests[0].headers["authorization"] == f"Basic {token}"

    @pytest.mark.parametrize("source", [
        "jaeger+ftp://me:hunter2@127.0.0.1:1?service=s",
        "tempo+http://me:hunter2@127.0.0.1:1?q={}",
        "phoenix+http://me:hunter2@127.0.0.1:notaport?project=p",
        # No backend named: taken for a file name, its "//" normalised to "/".
        "http://me:hunter2@127.0.0.1:1/x",
        "bogus+http://me:hunter2@127.0.0.1:1",
    ])
    def test_no_error_names_the_password(self, capsys, source):
        status, _, err = run_report(capsys, source)
        assert_one_line(status, err)
        assert "hunter2" not in err, err

    def test_the_api_key_wins_over_the_url(self, server, capsys, monkeypatch):
        monkeypatch.setenv("PHOENIX_API_KEY", KEY)
        server.routes["/v1/projects/p/spans"] = body(EMPTY_PAGE)
        run_report(capsys, f"phoenix+http://me:hunter2@{server.base}?project=p")
        assert server.requests[0].headers["authorization"] == f"Bearer {KEY}"


class TestDeadline:
    """One deadline for the whole request, however the server trickles."""

    @pytest.mark.parametrize("shape", [{}, {"length": False}, {"in_headers": True}],
                             ids=["body", "body-to-close", "headers"])
    def test_a_byte_at_a_time_is_cut_at_the_deadline(self, server, capsys, monkeypatch,
                                                     shape):
        # A byte every 0.2 s: a timeout per read (1.5 s) never fires; the whole would
        # take 40 s.
        monkeypatch.setenv("AGENT_LATENCY_BACKEND_TIMEOUT", "1.5")
        server.routes["/api/traces"] = trickle(0.2, 200, **shape)
        started = time.monotonic()
        status, _, err = run_report(capsys, f"jaeger+http://{server.base}?service=s")
        elapsed = time.monotonic() - started
        assert_one_line(status, err, "no whole answer within 1.5 s",
                        "AGENT_LATENCY_BACKEND_TIMEOUT")
        assert 1.4 < elapsed < 10, elapsed  # generous: a loaded machine
        assert server.sent.get("/api/traces", 0) < 40

    def test_default_is_documented_and_bad_values_keep_it(self, monkeypatch):
        from agent_latency.report._http import Limits

        assert Limits.from_environment() == Limits(30.0, 256_000_000, 10_000, 300.0,
                                                   1_000_000)
        for bad in ("abc", "0", "-1", "nan", "inf"):
            for name in ("TIMEOUT", "MAX_MB", "MAX_PAGES", "TOTAL_TIMEOUT", "MAX_SPANS"):
                monkeypatch.setenv(f"AGENT_LATENCY_BACKEND_{name}", bad)
            assert Limits.from_environment() == Limits()


class TestSizeCap:
    """A body over AGENT_LATENCY_BACKEND_MAX_MB is refused, and no more of it is read."""

    def test_endless_body(self, server, capsys, monkeypatch):
        monkeypatch.setenv("AGENT_LATENCY_BACKEND_MAX_MB", "1")
        server.routes["/api/traces"] = endless(limit=2_000_000_000)  # 2 GB
        status, _, err = run_report(capsys, f"jaeger+http://{server.base}?service=s")
        assert_one_line(status, err, "over 1 MB", "AGENT_LATENCY_BACKEND_MAX_MB")
        time.sleep(0.5)  # the server notices the closed connection
        # What the kernel's buffers held on top of the 1 MB read: far from 2 GB.
        assert server.sent["/api/traces"] < 64_000_000

    def test_declared_length_is_refused_before_reading(self, server, capsys, monkeypatch):
        monkeypatch.setenv("AGENT_LATENCY_BACKEND_MAX_MB", "1")
        server.routes["/api/traces"] = endless(limit=4_000_000, declared=4_000_000)
        status, _, err = run_report(capsys, f"jaeger+http://{server.base}?service=s")
        assert_one_line(status, err, "over 1 MB", "4,000,000 bytes declared")


DEEP = "[" * 100_000 + "]" * 100_000
# Jaeger and Phoenix answer one route each: (source, route) per backend.
ONE_ROUTE = {"jaeger": ("jaeger+http://{}?service=s", "/api/traces"),
             "phoenix": ("phoenix+http://{}?project=p", "/v1/projects/p/spans")}


class TestWrongShapes:
    """Well-formed answers of the wrong shape, bad parameters and ids, deep nesting: one
    line naming the URL, exit status 2, nothing requested that the user did not ask for."""

    JAEGER = (
        ("top-level list", "[]", "a JSON list where an object belongs"),
        ("data a number", '{"data": 5}', "'data' is a JSON int"),
        ("a trace a number", '{"data": [5]}', "a trace that is a JSON int"),
        ("spans a string", '{"data": [{"traceID": "ab", "spans": "x"}]}', "Jaeger's model"),
        ("an id a number", '{"data": [{"spans": [{"traceID": 5}]}]}', "Jaeger's model"),
        ("an error a number", '{"errors": [5]}', "Jaeger reports: 5"),
        ("infinite start", '{"data": [{"spans": [{"traceID": "ab", "spanID": "1", '
         '"startTime": 1e400, "duration": 1}]}]}', "Jaeger's model"),
        ("processes a list", '{"data": [{"processes": [1], "spans": [{"traceID": "ab", '
         '"spanID": "1", "startTime": 1, "duration": 1, "processID": "p"}]}]}',
         "Jaeger's model"),
        ("deep nesting", DEEP, "nested too deeply"),
        ("not JSON", "<html>busy</html>", "not JSON"),
        ("not UTF-8", b'{"data": "\xff\xfe"}', "not JSON"),
    )

    TEMPO = (
        ("search a list", {"/api/search": "[1]"}, "a JSON list where an object belongs"),
        ("traces a string", {"/api/search": '{"traces": "x"}'}, "'traces' is a JSON str"),
        ("an id that is a path", {"/api/search": '{"traces": [{"traceID": "../../admin"}]}'},
         "a search result without a trace id"),
        ("a trace a list", {"/api/search": '{"traces": [{"traceID": "ab"}]}',
                            "/api/traces/ab": "[1, 2]"}, "a JSON list"),
        ("batches a number", {"/api/search": '{"traces": [{"traceID": "ab"}]}',
                              "/api/traces/ab": '{"batches": 5}'}, "not OTLP/JSON"),
        ("deep trace", {"/api/search": '{"traces": [{"traceID": "ab"}]}',
                        "/api/traces/ab": DEEP}, "nested too deeply"),
    )

    @pytest.mark.parametrize(("routes", "words"), [c[1:] for c in TEMPO],
                             ids=[c[0] for c in TEMPO])
    def test_tempo(self, server, capsys, routes, words):
        for path, answer in routes.items():
            server.routes[path] = body(answer)
        status, _, err = run_report(capsys, f"tempo+http://{server.base}?q=%7B%7D")
        assert_one_line(status, err, f"http://{server.base}/api/", words)
        assert all(".." not in seen.path for seen in server.requests)

    PHOENIX = (
        ("data an object", '{"data": {"a": 1}}', "'data' is a JSON dict"),
        ("a span a number", '{"data": [5]}', "not Phoenix's span model"),
        ("a span without times", '{"data": [{"name": "x", "context": {"trace_id": "a", '
         '"span_id": "b"}}]}', "not Phoenix's span model"),
        ("a cursor an object", '{"data": [], "next_cursor": {"a": 1}}', "next_cursor"),
        ("deep attributes", '{"data": [{"name": "x", "attributes": ' + "{\"a\": " * 900
         + "1" + "}" * 900 + "}]}", "/v1/projects/p/spans"),
    )

    @pytest.mark.parametrize(
        ("backend", "answer", "words"),
        [("jaeger", *c[1:]) for c in JAEGER] + [("phoenix", *c[1:]) for c in PHOENIX],
        ids=[f"jaeger-{c[0]}" for c in JAEGER] + [f"phoenix-{c[0]}" for c in PHOENIX])
    def test_one_route(self, server, capsys, backend, answer, words):
        source, route = ONE_ROUTE[backend]
        server.routes[route] = body(answer)
        status, _, err = run_report(capsys, source.format(server.base))
        assert_one_line(status, err, f"http://{server.base}{route}", words)

    @pytest.mark.parametrize(("source", "words"), [
        ("jaeger+http://{}?service=s&limit=abc", "limit='abc'"),
        ("tempo+http://{}?q=x&limit=abc", "limit='abc'"),
        ("tempo+http://{}?q=x&limit=-5", "limit='-5'"),
        ("phoenix+http://{}?project=p&limit=1e3", "limit='1e3'"),
        ("jaeger+http://{}?trace=../../admin", "is not a trace id"),
        ("tempo+http://{}?trace=ab%20cd", "is not a trace id"),
        ("jaeger+http://{}:99999?service=s", "not a valid port"),
    ])
    def test_bad_parameters_send_nothing(self, server, capsys, source, words):
        status, _, err = run_report(capsys, source.format(server.base))
        assert_one_line(status, err, words)
        assert server.requests == []

    def test_http_error_body_is_one_escaped_line(self, server, capsys):
        server.routes["/api/traces"] = body("line one\nline two \x1b]0;title\x07", 503)
        status, _, err = run_report(capsys, f"jaeger+http://{server.base}?service=s")
        assert_one_line(status, err, "HTTP 503", "line one line two")
        assert "\x1b" not in err and "\x07" not in err


class TestPaging:
    """Phoenix's paging ends: at AGENT_LATENCY_BACKEND_MAX_PAGES, or at a cursor seen
    before."""

    def test_a_new_cursor_every_time(self, server, capsys, monkeypatch):
        monkeypatch.setenv("AGENT_LATENCY_BACKEND_MAX_PAGES", "5")
        server.routes["/v1/projects/p/spans"] = pages(lambda n: f"c{n}")
        status, _, err = run_report(capsys, f"phoenix+http://{server.base}?project=p")
        assert_one_line(status, err, "stopped after 5 pages",
                        "AGENT_LATENCY_BACKEND_MAX_PAGES")
        assert len(server.requests) == 5

    def test_a_cursor_that_comes_back(self, server, capsys):
        server.routes["/v1/projects/p/spans"] = pages(lambda n: "ab"[n % 2])
        status, _, err = run_report(capsys, f"phoenix+http://{server.base}?project=p")
        assert_one_line(status, err, "gave cursor 'b' again after 3 pages")
        assert len(server.requests) == 3
        assert [s.query.get("cursor") for s in server.requests] == [None, "b", "a"]


class TestPagingBounds:
    """A listing that never ends costs bounded memory and time, and keeps what it read."""

    URL = "phoenix+http://{}?project=p"

    def read(self, server) -> tuple[int, list[str]]:
        problems: list[str] = []
        spans = sum(len(trace) for trace in iter_source(self.URL.format(server.base),
                                                        problems))
        return spans, problems

    def test_spans_held_are_bounded(self, server, monkeypatch):
        monkeypatch.setenv("AGENT_LATENCY_BACKEND_MAX_SPANS", "2500")
        server.routes["/v1/projects/p/spans"] = pages(lambda n: f"c{n}", spans=1000)
        spans, problems = self.read(server)
        assert spans == 3000 and len(server.requests) == 3
        (problem,) = problems
        assert "stopped after 3 pages holding 3,000 spans (AGENT_LATENCY_BACKEND_MAX_SPANS)" \
            in problem and "the 3,000 spans read are reported" in problem

    def test_one_deadline_for_all_pages(self, server, monkeypatch):
        monkeypatch.setenv("AGENT_LATENCY_BACKEND_TOTAL_TIMEOUT", "1")
        server.routes["/v1/projects/p/spans"] = pages(lambda n: f"c{n}", spans=10,
                                                      delay_s=0.3)
        started = time.monotonic()
        spans, problems = self.read(server)
        assert time.monotonic() - started < 5
        (problem,) = problems
        assert "AGENT_LATENCY_BACKEND_TOTAL_TIMEOUT" in problem, problem
        assert spans >= 10 and f"the {spans:,} spans read are reported" in problem

    def test_a_page_that_fails_keeps_the_pages_before(self, server):
        server.routes["/v1/projects/p/spans"] = pages(lambda n: f"c{n}", cap=3, spans=5)
        spans, problems = self.read(server)
        assert spans == 15
        (problem,) = problems
        assert "stopped after 3 pages: " in problem and "HTTP 500" in problem

    def test_the_command_reports_what_was_read(self, server, capsys, monkeypatch):
        monkeypatch.setenv("AGENT_LATENCY_BACKEND_MAX_SPANS", "10")
        server.routes["/v1/projects/p/spans"] = pages(lambda n: f"c{n}", spans=10)
        status, _, err = run_report(capsys, "--keep-going", self.URL.format(server.base))
        assert status == 2 and "Traceback" not in err
        assert "AGENT_LATENCY_BACKEND_MAX_SPANS" in err.splitlines()[0]
