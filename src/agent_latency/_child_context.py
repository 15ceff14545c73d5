"""The trace context a child process inherits: ``TRACEPARENT``/``TRACESTATE``/``BAGGAGE`` in its
environment (added to the list ``Popen`` already encoded, so the environment is not
re-encoded in Python), and read back by a child that is instrumented itself.

Under ``opentelemetry-instrument`` the child's ``PYTHONPATH`` also loses the directory of
OpenTelemetry's start-up ``sitecustomize`` (see :func:`auto_instrumentation_dir`): a child
Python process (a test suite, a linter the agent runs) is not instrumented, as under
``agent-latency run``.  Instrumenting it would put its whole OpenTelemetry start-up
(0.2–2 s) inside the tool's time, which is the figure being measured.
"""

from __future__ import annotations

import os
import sys
import threading
from typing import Any

from opentelemetry import baggage, trace
from opentelemetry import context as otel_context
from opentelemetry.propagators.textmap import DefaultGetter
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator

from . import semconv
from ._env import env_flag
from ._log import FAULTS, fault, internal_error


def context_env(span: trace.Span) -> dict[str, str]:
    """``TRACEPARENT`` (and ``TRACESTATE`` / ``BAGGAGE`` when set) naming ``span``."""
    sc = span.get_span_context()
    if not sc.is_valid:
        return {}
    env = {"TRACEPARENT": f"00-{sc.trace_id:032x}-{sc.span_id:016x}-{sc.trace_flags:02x}"}
    if sc.trace_state:
        env["TRACESTATE"] = sc.trace_state.to_header()
    if baggage.get_all():
        # Only with baggage: start-up time most programs never need.
        from opentelemetry.baggage.propagation import W3CBaggagePropagator

        carrier: dict[str, str] = {}
        W3CBaggagePropagator().inject(carrier)
        if "baggage" in carrier:
            env["BAGGAGE"] = carrier["baggage"]
    return env


def auto_instrumentation_dir() -> str | None:
    """The directory of ``opentelemetry-instrument``'s ``sitecustomize`` when this process
    was started by it (that module is loaded and its directory is on ``PYTHONPATH``), and
    child processes are not asked for (``AGENT_LATENCY_RUN_CHILDREN``); else None."""
    module = sys.modules.get("opentelemetry.instrumentation.auto_instrumentation")
    path = getattr(module, "__file__", None)
    if not path:
        return None
    directory = os.path.dirname(os.path.abspath(path))
    if directory not in os.environ.get("PYTHONPATH", "").split(os.pathsep):
        return None
    return None if env_flag(semconv.ENV_RUN_CHILDREN, False) else directory


def without_dir(path_value: str, directory: str) -> str | None:
    """``path_value`` (a ``PYTHONPATH``) without ``directory``; None when nothing is left."""
    parts = [p for p in path_value.split(os.pathsep)
             if p and os.path.abspath(p) != directory]
    return os.pathsep.join(parts) if parts else None


_TRACE_KEYS = ("TRACEPARENT", "TRACESTATE", "BAGGAGE")
_TRACE_KEYS_B = tuple(k.encode() for k in _TRACE_KEYS)
_TRACE_PREFIXES_B = tuple(k + b"=" for k in _TRACE_KEYS_B)
_PYTHONPATH_B = b"PYTHONPATH="
_ENV_LIST = 5  # fork_exec(args, executable_list, close_fds, pass_fds, cwd, env_list, ...)

# The trace context for the spawn this thread is in the middle of (set by the
# ``_execute_child`` wrapper, taken by the ``fork_exec`` / ``_posix_spawn`` hooks), and the
# start-up directory to take off the child's ``PYTHONPATH`` (``strip``).
_pending = threading.local()


def child_env(env: Any, extra: dict[str, str], strip: str | None = None) -> Any:
    """A new environment mapping: ``env`` (or ours when ``None``) plus ``extra``, and without
    ``strip`` on its ``PYTHONPATH``.

    The user's mapping and ``os.environ`` are never changed.  With ``env=None`` the copy is
    made from ``os.environ``'s bytes table, which ``Popen`` accepts as is (it encodes every
    key and value with ``os.fsencode``): a C-level dict copy, not a decode of every entry.
    """
    if env is None:
        data = getattr(os.environ, "_data", None)
        if isinstance(data, dict) and os.name == "posix":
            new: dict[Any, Any] = dict(data)
            for key_b in _TRACE_KEYS_B:
                new.pop(key_b, None)
            for key, value in extra.items():
                new[key.encode()] = value.encode()
            if strip is not None:
                _strip_mapping(new, b"PYTHONPATH", strip)
            return new
        new = dict(os.environ)
    else:
        new = dict(env)
        for key_b in _TRACE_KEYS_B:
            new.pop(key_b, None)
    for key in _TRACE_KEYS:
        new.pop(key, None)
    new.update(extra)
    if strip is not None:
        _strip_mapping(new, "PYTHONPATH", strip)
        _strip_mapping(new, b"PYTHONPATH", strip)
    return new


def _strip_mapping(env: dict[Any, Any], key: Any, strip: str) -> None:
    value = env.get(key)
    if value is None:
        return
    text = os.fsdecode(value)
    kept = without_dir(text, strip)
    if kept == text:
        return
    if kept is None:
        del env[key]
    else:
        env[key] = os.fsencode(kept) if isinstance(value, bytes) else kept


def child_env_list(env_list: Any, extra: dict[str, str], strip: str | None = None) -> Any:
    """``fork_exec``'s ``env_list`` plus ``extra``: ``None`` (inherit) becomes the encoded
    ``os.environ``; earlier trace entries are dropped, and ``strip`` leaves ``PYTHONPATH``.
    Anything else is left as it is."""
    if env_list is None:
        data = getattr(os.environ, "_data", None)
        if not isinstance(data, dict):
            return env_list
        base = [k + b"=" + v for k, v in data.items() if k not in _TRACE_KEYS_B]
    elif isinstance(env_list, list):
        base = [e for e in env_list if not (isinstance(e, bytes)
                                            and e.startswith(_TRACE_PREFIXES_B))]
    else:
        return env_list
    if strip is not None:
        for i, entry in enumerate(base):
            if isinstance(entry, bytes) and entry.startswith(_PYTHONPATH_B):
                kept = without_dir(os.fsdecode(entry[len(_PYTHONPATH_B):]), strip)
                base[i] = b"" if kept is None else _PYTHONPATH_B + os.fsencode(kept)
        base = [e for e in base if e != b""]
    base.extend(f"{k}={v}".encode() for k, v in extra.items())
    return base


def _fork_exec_hook(real: Any) -> Any:
    def fork_exec(*args: Any) -> Any:
        extra = getattr(_pending, "extra", None)
        if extra is not None and len(args) > _ENV_LIST:
            _pending.extra = None
            try:
                if FAULTS:
                    fault("subprocess.fork_exec")
                env_list = child_env_list(args[_ENV_LIST], extra,
                                          getattr(_pending, "strip", None))
                args = (*args[:_ENV_LIST], env_list, *args[_ENV_LIST + 1:])
            except Exception:  # noqa: BLE001 - the spawn goes on without the context
                internal_error("subprocess.fork_exec")
        return real(*args)

    fork_exec.__wrapped__ = real  # type: ignore[attr-defined]  # a function takes attributes
    return fork_exec


def _posix_spawn_hook(wrapped: Any, instance: Any, args: tuple[Any, ...],
                      kwargs: dict[str, Any]) -> Any:
    # Popen._posix_spawn(self, args, executable, env, ...): os.posix_spawn encodes in C.
    extra = getattr(_pending, "extra", None)
    if extra is not None and len(args) > 2:
        _pending.extra = None
        try:
            if FAULTS:
                fault("subprocess.posix_spawn")
            args = (*args[:2], child_env(args[2], extra, getattr(_pending, "strip", None)),
                    *args[3:])
        except Exception:  # noqa: BLE001
            internal_error("subprocess.posix_spawn")
    return wrapped(*args, **kwargs)


def parent_context_from_env(environ: Any = None) -> otel_context.Context | None:
    """The context named by ``TRACEPARENT``/``TRACESTATE`` in the environment, if valid."""
    environ = os.environ if environ is None else environ
    traceparent = environ.get("TRACEPARENT")
    if not traceparent:
        return None
    carrier = {"traceparent": traceparent}
    if environ.get("TRACESTATE"):
        carrier["tracestate"] = environ["TRACESTATE"]
    try:
        ctx = TraceContextTextMapPropagator().extract(carrier, getter=DefaultGetter())
        if environ.get("BAGGAGE"):
            # Only with baggage: start-up time most programs never need.
            from opentelemetry.baggage.propagation import W3CBaggagePropagator

            ctx = W3CBaggagePropagator().extract({"baggage": environ["BAGGAGE"]}, context=ctx)
    except Exception:  # noqa: BLE001 - a malformed header is ignored
        return None
    if not trace.get_current_span(ctx).get_span_context().is_valid:
        return None
    return ctx
