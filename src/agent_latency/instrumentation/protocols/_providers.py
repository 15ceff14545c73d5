"""``gen_ai.provider.name`` as the GenAI conventions spell it, from the client library that
sent a request (its ``User-Agent``) or the host it went to.  ``openai`` is OpenAI's own: an
OpenAI-compatible request to another provider is named for that provider."""

from __future__ import annotations

from collections.abc import Mapping

from ... import semconv

# Host suffixes (lower-case) and the provider they belong to; the first that fits wins.
_HOSTS: tuple[tuple[str, str], ...] = (
    ("api.openai.com", semconv.PROVIDER_OPENAI),
    ("api.anthropic.com", semconv.PROVIDER_ANTHROPIC),
    ("api.groq.com", semconv.PROVIDER_GROQ),
    ("api.mistral.ai", semconv.PROVIDER_MISTRAL_AI),
    ("api.deepseek.com", semconv.PROVIDER_DEEPSEEK),
    ("api.x.ai", semconv.PROVIDER_X_AI),
    ("api.perplexity.ai", semconv.PROVIDER_PERPLEXITY),
    ("api.cohere.com", semconv.PROVIDER_COHERE),
    ("api.cohere.ai", semconv.PROVIDER_COHERE),
    (".openai.azure.com", semconv.PROVIDER_AZURE_AI_OPENAI),
    (".services.ai.azure.com", semconv.PROVIDER_AZURE_AI_INFERENCE),
    (".inference.ai.azure.com", semconv.PROVIDER_AZURE_AI_INFERENCE),
    ("amazonaws.com", semconv.PROVIDER_AWS_BEDROCK),
    ("aiplatform.googleapis.com", semconv.PROVIDER_GCP_VERTEX_AI),
    ("generativelanguage.googleapis.com", semconv.PROVIDER_GCP_GEMINI),
    (".ml.cloud.ibm.com", semconv.PROVIDER_IBM_WATSONX_AI),
    ("huggingface.co", semconv.PROVIDER_HUGGINGFACE),
)
# A client library's ``User-Agent`` (lower-case) and the provider it speaks to.
_AGENTS: tuple[tuple[str, str], ...] = (
    ("groq/", semconv.PROVIDER_GROQ),
    ("mistral-client", semconv.PROVIDER_MISTRAL_AI),
    ("mistralai", semconv.PROVIDER_MISTRAL_AI),
    ("huggingface_hub", semconv.PROVIDER_HUGGINGFACE),
    ("hf_hub/", semconv.PROVIDER_HUGGINGFACE),
    ("ollama-python", semconv.PROVIDER_OLLAMA),
    ("cohere", semconv.PROVIDER_COHERE),
    ("botocore", semconv.PROVIDER_AWS_BEDROCK),
    ("openai/", semconv.PROVIDER_OPENAI),
    ("anthropic/", semconv.PROVIDER_ANTHROPIC),
)
# Ports a local model server listens on by default.
_PORTS = {11434: semconv.PROVIDER_OLLAMA}


# (host, port) -> provider, per server asked: a host no rule names is checked against every
# one (~5 µs), and a program calls the same few servers again and again.
_ASKED: dict[tuple[str | None, int | None], str | None] = {}
_NOT_ASKED = object()


def provider_of_host(host: str | None, port: int | None = None) -> str | None:
    """The provider that serves ``host``, where it is a known one."""
    key = (host, port)
    known = _ASKED.get(key, _NOT_ASKED)
    if known is not _NOT_ASKED:
        return known  # type: ignore[return-value]
    if len(_ASKED) >= 256:
        _ASKED.clear()
    provider = _ASKED[key] = _provider_of_host(host, port)
    return provider


def _provider_of_host(host: str | None, port: int | None) -> str | None:
    if host:
        host = host.lower().rstrip(".")
        for suffix, provider in _HOSTS:
            if host == suffix.lstrip(".") or host.endswith(suffix if suffix[0] == "."
                                                            else "." + suffix):
                return provider
    return _PORTS.get(port) if port is not None else None


def provider_of_client(headers: Mapping[str, str]) -> str | None:
    """The provider whose client library wrote a request (headers' names lower-cased)."""
    agent = headers.get("user-agent", "").lower()
    if headers.get("x-fern-sdk-name", "").lower() == "cohere":
        return semconv.PROVIDER_COHERE
    for marker, provider in _AGENTS:
        if marker in agent:
            return provider
    return None


def provider_of(default: str, host: str | None, port: int | None,
                headers: Mapping[str, str]) -> str:
    """A request's provider: its host's where known (the openai SDK sent to Groq is Groq),
    else its client library's, else its protocol's ``default``."""
    return provider_of_host(host, port) or provider_of_client(headers) or default
