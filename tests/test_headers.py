"""``_headers.header_values``: headers by name, as the clients' own ``get`` gives them."""

from __future__ import annotations

import sys

import httpx
import pytest

from agent_latency._headers import header_values


def header(headers: object, name: str) -> str | None:
    """One name's answer."""
    return header_values(headers, (name.encode("ascii"),))[0]

HEADER_TYPES = [httpx.Headers]
try:
    import httpx2
except ImportError:  # (httpx2 is the openai SDK's newer line: installed with it)
    pass
else:
    HEADER_TYPES.append(httpx2.Headers)


@pytest.fixture(params=HEADER_TYPES, ids=lambda cls: cls.__module__.split(".")[0])
def headers_type(request: pytest.FixtureRequest) -> type:
    return request.param


class TestHttpxHeaders:
    """httpx's and httpx2's headers: the same answers as their ``get``, without the
    ``KeyError`` it raises and catches for an absent name."""

    def test_same_answers_as_get(self, headers_type: type) -> None:
        headers = headers_type([("X-Request-ID", "req_1"), ("openai-processing-ms", "12"),
                                ("Set-Cookie", "a=1"), ("set-cookie", "b=2"),
                                ("X-Name", "caf\u00e9".encode())])
        for name in ("x-request-id", "openai-processing-ms", "set-cookie", "x-name",
                     "x-queue-time", "request-id"):
            assert header(headers, name) == headers.get(name), name

    def test_an_absent_name_raises_nothing(self, headers_type: type) -> None:
        headers = headers_type({"content-type": "application/json"})
        raised = []

        def watch(frame, event, arg):  # type: ignore[no-untyped-def]
            if event == "exception":
                raised.append(arg[0])
            return watch

        sys.settrace(watch)
        try:
            got = header(headers, "x-request-id")
        finally:
            sys.settrace(None)
        assert got is None and raised == []


class TestOtherMappings:
    """Any other mapping is asked through its own ``get``."""

    def test_a_dict(self) -> None:
        assert header({"x-request-id": "r"}, "x-request-id") == "r"
        assert header({}, "x-request-id") is None

    def test_a_case_insensitive_mapping(self) -> None:
        requests = pytest.importorskip("requests")
        headers = requests.structures.CaseInsensitiveDict({"X-Request-Id": "r"})
        assert header(headers, "x-request-id") == "r"


class TestSeveralNames:
    """header_values: each name's answer as its own get gives it, from one pass."""

    def test_same_answers_as_get(self, headers_type: type) -> None:
        headers = headers_type([("X-Request-ID", "req_1"), ("openai-processing-ms", "12"),
                                ("Set-Cookie", "a=1"), ("set-cookie", "b=2"),
                                ("X-Name", "caf\u00e9".encode())])
        names = ("x-request-id", "request-id", "set-cookie", "x-name", "openai-processing-ms")
        got = header_values(headers, tuple(name.encode() for name in names))
        assert got == [headers.get(name) for name in names]

    def test_any_mapping(self) -> None:
        got = header_values({"x-queue-time": "3"}, (b"x-queue-time", b"x-absent"))
        assert got == ["3", None]
