"""Loaded at interpreter start-up under ``agent-latency run`` (its directory is first on
``PYTHONPATH``).  Restores the environment the program would have had, runs the
``sitecustomize`` this one shadows, then instruments the process and opens its task.

Deliberately not a package module: it is found by name on ``sys.path``.  Any failure here is
reported on stderr in one line and the program runs uninstrumented.
"""


def _agent_latency_bootstrap() -> None:
    # Imported inside: this runs in every Python of the run, whose namespace stays its own.
    import json
    import os
    import sys

    spec_text = os.environ.get("AGENT_LATENCY_RUN")
    here = os.path.dirname(os.path.abspath(__file__))
    # sys.path as it would be without us.
    sys.path[:] = [p for p in sys.path if os.path.abspath(p or ".") != here]
    if not spec_text:
        return
    try:
        spec = json.loads(spec_text)
    except ValueError:
        return
    if not spec.get("children"):
        # The program and its children see the original environment.
        os.environ.pop("AGENT_LATENCY_RUN", None)
        original = spec.get("pythonpath")
        if original is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = original
    # Run the sitecustomize we shadow, as site.py would have.
    this = sys.modules.pop("sitecustomize", None)
    try:
        import sitecustomize  # type: ignore[import-not-found]  # noqa: F401 - the one we shadow, if any
    except ImportError as exc:
        if exc.name != "sitecustomize":
            _warn(f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n"
                  f"{type(exc).__name__}: {exc}")
    except Exception as exc:  # noqa: BLE001 - what site.py does
        _warn(f"Error in sitecustomize; set PYTHONVERBOSE for traceback:\n"
              f"{type(exc).__name__}: {exc}")
    finally:
        if "sitecustomize" not in sys.modules and this is not None:
            sys.modules["sitecustomize"] = this
    try:
        # Inside the try: an interpreter without agent_latency gets one warning, not a failed start.
        from agent_latency._inside import bootstrap
    except ImportError as exc:
        _warn(f"agent-latency: cannot import agent_latency in {sys.executable} ({exc}); "
              "running uninstrumented")
        return
    try:
        bootstrap(json.dumps(spec))
    except Exception as exc:  # noqa: BLE001 - never stop the program
        _warn(f"agent-latency: instrumentation failed ({type(exc).__name__}: {exc}); "
              "running uninstrumented")


def _warn(text: str) -> None:
    # Imported inside: this runs in every Python of the run, whose namespace stays its own.
    import sys

    # None when stderr is closed (``2>&-``): print(file=None) would write to stdout.
    if sys.stderr is not None:
        print(text, file=sys.stderr)


_agent_latency_bootstrap()
del _agent_latency_bootstrap
