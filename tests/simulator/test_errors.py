"""Bad requests get the real APIs' error shapes and statuses, never a traceback."""

from __future__ import annotations

import pytest

httpx = pytest.importorskip("httpx")


class TestOpenAIErrors:
    """OpenAI routes answer ``{"error": {message, type, param, code}}``."""

    @pytest.mark.parametrize(("method", "path", "body", "status"), [
        ("POST", "/v1/chat/completions", b"{not json", 400),
        ("POST", "/v1/chat/completions", b'{"model": "m"}', 400),
        ("POST", "/v1/chat/completions", b'{"model": "m", "messages": []}', 400),
        ("POST", "/v1/chat/completions", b"[1, 2]", 400),
        ("POST", "/v1/responses", b'{"model": "m"}', 400),
        ("POST", "/v1/embeddings", b'{"model": "m"}', 400),
        ("GET", "/v1/nowhere", None, 404),
        ("GET", "/v1/chat/completions", None, 405),
        ("GET", "/v1/responses", None, 405),
    ])
    def test_shape(self, sim, method: str, path: str, body: bytes | None, status: int) -> None:
        r = httpx.request(method, sim.base_url + path, content=body)
        assert r.status_code == status
        err = r.json()["error"]
        assert set(err) == {"message", "type", "param", "code"}
        assert "Traceback" not in r.text


class TestAnthropicErrors:
    """``/v1/messages`` answers ``{"type": "error", "error": {type, message}}``."""

    @pytest.mark.parametrize("body", [b"{oops", b'{"model": "c", "messages": []}',
                                      b'{"model": "c", "max_tokens": 5}'])
    def test_shape(self, sim, body: bytes) -> None:
        r = httpx.post(sim.base_url + "/v1/messages", content=body)
        assert r.status_code == 400
        data = r.json()
        assert data["type"] == "error" and data["error"]["type"] == "invalid_request_error"

    def test_sdk_raises_bad_request(self, anthropic_client) -> None:
        anthropic = pytest.importorskip("anthropic")
        with pytest.raises(anthropic.BadRequestError):
            anthropic_client.messages.create(model="c", max_tokens=5, messages=[])
