"""A process's life and end as the program's own: forked children start clean, a
multiprocessing worker's spans are exported, and the exit status is never changed by us.

What a process opened — its tasks, its process task, the child processes it tracks, its
``SIGTERM`` handler — belongs to it alone: each module that holds such state clears it in
a forked child with ``os.register_at_fork(after_in_child=...)`` (``_scope``, ``_process``,
``processor``, ``instrumentation.tools.subprocess``, ``_log``).  The child's own work is
recorded and exported as usual: the SDK's batch processor starts a fresh worker thread in
the child (``BatchProcessor._at_fork_reinit``) and drops the parent's queued spans.

One gap is left by Python itself: a ``multiprocessing`` worker started by fork (``Pool``,
``Process``, ``ProcessPoolExecutor``, also a ``forkserver`` child) ends with ``os._exit``,
which runs no ``atexit`` hook, so the provider is never flushed and its spans would be lost.
The hook used here is the one place every such worker passes through on its way out:
``multiprocessing.process.BaseProcess._bootstrap`` (it runs the target, then returns the
exit code to ``os._exit``).  It is wrapped in a forked child (multiprocessing is imported by
then) so that, after the worker's own code finished, open tasks of the worker are ended and
the tracer provider is flushed, bounded by the exit bound (``AGENT_LATENCY_EXIT_TIMEOUT``).
A ``spawn`` worker is a fresh interpreter that exits through ``sys.exit``; its ``atexit``
hooks flush as usual.

Ctrl-C: CPython exits "killed by SIGINT" (status 130 in a shell) after an uncaught
``KeyboardInterrupt`` only while a flag it sets then is still set at the very end, and any
``exec`` of source text in the meantime clears it — an import that builds a named tuple or a
dataclass, say the exporter's protobuf modules on their first use at exit.  So
:func:`keep_sigint_exit`, from our last exit hook, flushes first (the exporter's imports
happen now) and then sets the flag again the way CPython does: the uncaught exception was
``KeyboardInterrupt`` (``sys.last_type``), so the exit is the one Python would have made.
"""

from __future__ import annotations

import functools
import os
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from ._log import FAULTS, Guard, fault, internal_error

_MARK = "_agent_latency_flushes"
# The flush under way, if any: a signal that comes during the exit flush waits for it
# instead of finding the queue already taken and killing the process mid-export.
_flushing: list[threading.Thread | None] = [None]


@Guard("fork.flush")
def flush_provider(timeout_s: float | None = None) -> None:
    """Flush the global tracer provider, never waiting longer than ``timeout_s`` (default:
    the exit bound, ``AGENT_LATENCY_EXIT_TIMEOUT``).

    The flush runs on a daemon thread that is joined with a timeout: an exporter that
    ignores its own timeout (a slow backend, retries) cannot hold the process.  Imports
    nothing.
    """
    from opentelemetry import trace  # already imported: instrument() did

    from . import _export_guard  # already imported: instrument() did

    if timeout_s is None:
        timeout_s = _export_guard.exit_timeout_s
    deadline = time.monotonic() + timeout_s
    earlier = _flushing[0]
    if earlier is not None and earlier.is_alive() and earlier is not threading.current_thread():
        earlier.join(timeout_s)
    flush = getattr(trace.get_tracer_provider(), "force_flush", None)
    if flush is None:
        return
    left = max(deadline - time.monotonic(), 0.0)
    worker = threading.Thread(target=flush, args=(int(left * 1000),),
                              name="agent-latency-flush", daemon=True)
    try:
        worker.start()
    except RuntimeError:  # no new threads this late in shutdown: flush here
        flush(int(left * 1000))
        return
    _flushing[0] = worker
    worker.join(left)
    _wait_for_shutdown_exports(trace.get_tracer_provider(), deadline)


def keep_sigint_exit() -> None:
    """After an uncaught ``KeyboardInterrupt``: flush now, then make sure CPython still ends
    the process "killed by SIGINT", as it would without us (see the module docstring)."""
    if getattr(sys, "last_type", None) is not KeyboardInterrupt:
        return
    flush_provider()
    try:
        # CPython sets its "unhandled KeyboardInterrupt" flag when code run from source text
        # ends in exactly KeyboardInterrupt (pythonrun.c, run_eval_code_obj).
        exec("raise KeyboardInterrupt")  # noqa: S102
    except KeyboardInterrupt:
        pass


def _finish_worker() -> None:
    try:
        if FAULTS:
            fault("fork.finish_worker")
        if _worker_exit is not None:
            _worker_exit()  # the worker's own tasks still open
    except Exception:  # noqa: BLE001
        internal_error("fork.finish_worker")
    flush_provider()


@Guard("fork.pool_idle")
def _flush_when_idle(process: Any) -> None:
    """A ``Pool`` worker flushes the spans it has queued before it sends a task's result, so
    they are out before ``map()`` returns, and before it waits for more work when none is
    waiting.  ``Pool.terminate()``, the end of a ``with Pool`` block, kills idle workers with
    ``SIGTERM``, so what they recorded must be out by then.  The cost is one flush per task
    that recorded spans (bounded by ``AGENT_LATENCY_EXIT_TIMEOUT``): an export to the local
    file takes about a millisecond; agent tasks take seconds.

    This is not a ``SIGTERM`` handler, which an earlier version installed. A Python-level
    handler only runs when the main thread gets back to the interpreter. A worker blocked on
    the task queue's lock misses a signal that lands between CPython's check for signals and
    its wait. It then never dies, and ``terminate()`` waits for it forever (about once in 60
    runs on a loaded machine, ``tests/reliability/test_fork.py``).  Without a handler,
    ``SIGTERM`` kills, as it would without us.
    """
    target = getattr(process, "_target", None)
    if (getattr(target, "__module__", None) != "multiprocessing.pool"
            or getattr(target, "__name__", None) != "worker"):
        return
    tasks, results = process._args[0], process._args[1]  # worker(inqueue, outqueue, …)
    wait, send, waiting = tasks.get, results.put, tasks._reader.poll

    def flush_queued(unless_work_waits: bool = False) -> None:
        try:
            if not (unless_work_waits and waiting()) and _spans_queued():
                flush_provider()
        except Exception:  # noqa: BLE001
            internal_error("fork.pool_idle")

    def put(result: Any) -> None:
        flush_queued()
        send(result)

    def get() -> Any:
        flush_queued(unless_work_waits=True)
        return wait()

    # The worker looks both up once it starts, after this.
    results.put = put
    tasks.get = get


def _spans_queued() -> bool:
    # Imported by instrument() already: a look-up, at exit or in a forked child.
    from opentelemetry import trace

    from ._sdk import batch_processors, batch_queue

    return any(batch_queue(batch) for batch in batch_processors(trace.get_tracer_provider()))


def _wrap_bootstrap() -> None:
    """Wrap ``BaseProcess._bootstrap`` (once) so a worker flushes before ``os._exit``."""
    process_module = sys.modules.get("multiprocessing.process")
    if process_module is None:
        return
    base = process_module.BaseProcess
    original = base.__dict__.get("_bootstrap")
    if original is None or getattr(original, _MARK, False):
        return

    def _bootstrap(self: Any, *args: Any, **kwargs: Any) -> Any:
        _flush_when_idle(self)
        try:
            return original(self, *args, **kwargs)
        finally:
            _finish_worker()

    setattr(_bootstrap, _MARK, True)
    _bootstrap.__wrapped__ = original  # type: ignore[attr-defined]  # a function takes attributes
    base._bootstrap = _bootstrap


def _wait_for_shutdown_exports(provider: object, deadline: float) -> None:
    """A signal during the provider's own shutdown (at exit) finds ``force_flush`` a no-op
    while the shutdown's last export is still running on the batch worker: wait for it
    (SDK internals, looked up defensively) until the deadline."""
    # Imported by instrument() already: a look-up, at exit or in a forked child.
    from ._sdk import batch_processors, batch_worker

    for batch in batch_processors(provider):
        worker = batch_worker(batch)
        if (worker is not None and worker.is_alive()
                and worker is not threading.current_thread()):
            worker.join(max(deadline - time.monotonic(), 0.0))


def _drop_parents_queued_spans() -> None:
    """Empty the batch processors' queues in the child: spans the parent ended before the
    fork are the parent's to export.  The SDK's own fork hook does this too; seen to miss
    now and then under ``Pool`` (a parent span exported twice), so it is made sure here."""
    # Imported by instrument() already: a look-up, at exit or in a forked child.
    from opentelemetry import trace

    from ._sdk import batch_processors, batch_queue

    for batch in batch_processors(trace.get_tracer_provider()):
        queue = batch_queue(batch)
        if queue is not None:
            queue.clear()


@Guard("fork.after_in_child")
def _after_in_child() -> None:
    _drop_parents_queued_spans()
    _wrap_bootstrap()


_registered = False
_worker_exit: Callable[[], None] | None = None

# -- our threads out of the way of an ``os.fork()`` -------------------------------------------
#: How long a fork waits for our threads to stop (an export under way finishes first).
_PAUSE_S = 0.5
#: The batch processors of the exports set-up built (``instrument()`` passes the look-up).
_own_batches: Callable[[], list[Any]] = list
_paused: list[Any] = []
_watcher_paused = [False]


def _threads_are_greenlets() -> bool:
    monkey = sys.modules.get("gevent.monkey")
    try:
        return monkey is not None and bool(monkey.is_module_patched("threading"))
    except Exception:  # noqa: BLE001
        return True


def _os_threads() -> int | None:
    """This process's thread count, as the kernel has it (what Python 3.12's fork warning
    counts), or None off Linux."""
    try:
        with open("/proc/self/stat", "rb") as stat:
            return int(stat.read().rpartition(b")")[2].split()[17])
    except (OSError, ValueError, IndexError):
        return None


def _watcher() -> Any:
    module = sys.modules.get("agent_latency.instrumentation.net._watcher")
    return module.WATCHER if module is not None else None


@Guard("fork.before")
def _before_fork() -> None:
    """Python 3.12 warns on ``os.fork()`` in a process with more than one thread: where the
    only others are ours (the export worker, the arrival watcher), they stop for the fork
    and start again after it, so the program's fork warns only where its own threads would.
    Greenlets (gevent) are no threads: nothing to stop."""
    if sys.version_info < (3, 12) or _threads_are_greenlets():
        return
    from ._sdk import pause_batch, worker_thread  # imported by instrument() already: a look-up

    batches = _own_batches()
    watcher = _watcher()
    ours = {worker_thread(batch) for batch in batches}
    if watcher is not None:
        ours.add(watcher.thread)
    current = threading.current_thread()
    known = threading.enumerate()
    if any(t is not current and t not in ours for t in known):
        return  # the program's own threads: it warns anyway
    if _os_threads() not in (None, len(known)):
        return  # threads Python does not know (a C library's)
    for batch in batches:
        if pause_batch(batch, _PAUSE_S) is not None:
            _paused.append(batch)  # started again after the fork, stopped in time or not
    if watcher is not None and watcher.thread is not None:
        watcher.pause(_PAUSE_S)
        _watcher_paused[0] = True  # started again after the fork, stopped in time or not
    # A joined thread leaves the kernel's count a moment after Python's (3.12).
    deadline = time.monotonic() + 0.05
    while (_os_threads() or 1) > 1 and time.monotonic() < deadline:
        time.sleep(0.0005)


def _resume_after_fork(start: bool) -> None:
    from ._sdk import resume_batch  # imported by instrument() already: a look-up

    while _paused:
        resume_batch(_paused.pop(), start)
    if _watcher_paused[0]:
        _watcher_paused[0] = False
        watcher = _watcher()
        if watcher is not None and start:
            watcher.resume()


# Set while ``os.fork`` runs through :func:`_fork_resuming_after`, which starts our threads
# again itself once the fork returned.
_through_wrapper = [False]


@Guard("fork.after_in_parent")
def _after_fork_in_parent() -> None:
    # A fork through a reference to ``os.fork`` taken before ``instrument()``: resumed here.
    if not _through_wrapper[0]:
        _resume_after_fork(start=True)


def _fork_resuming_after(real: Callable[[], int]) -> Callable[[], int]:
    """``os.fork`` that starts our threads again after it returned in the parent: Python
    3.13 warns after the parent's fork hooks have run, so they must not start them."""

    @functools.wraps(real)
    def fork() -> int:
        _through_wrapper[0] = True
        try:
            pid = real()
        except BaseException:
            _through_wrapper[0] = False
            _after_fork_in_parent()
            raise
        if pid:
            _through_wrapper[0] = False
            _after_fork_in_parent()
        return pid

    fork.__agent_latency_fork__ = True  # type: ignore[attr-defined]  # a function takes attributes
    return fork


#: True in a forked child from its first fork hook until it first yields to gevent's hub
#: (see :func:`defer_in_forked_child`).
_in_child_hooks = [False]


@Guard("fork.resume_in_child")
def _resume_in_child() -> None:
    # Before the SDK's own fork hooks (registered at import, before any processor is
    # built): they start the child's workers, which must find the processor open.  The
    # watcher starts afresh on first use (its own fork hook).
    _in_child_hooks[0] = _threads_are_greenlets()
    _through_wrapper[0] = False
    _resume_after_fork(start=False)


def in_forked_child_hooks() -> bool:
    """Whether this is a forked child under gevent that has not yet yielded to its hub."""
    return _in_child_hooks[0]


def defer_in_forked_child(start: Callable[[], object]) -> bool:
    """Under gevent, in a forked child's fork hooks: run ``start`` (an export worker's
    ``Thread.start``) once the child first yields to the hub, not now, and say True.

    The SDK restarts its batch worker in the child from a fork hook; a gevent thread's
    ``start`` waits for it on the hub, which then runs every greenlet the parent had, inside
    the child: its HTTP calls again on the parent's connections, its other processes (a
    process started from a greenlet waits seconds, and gevent's own fork hook fails its
    checks).  A child that execs never yields, and never needed the worker."""
    if not _in_child_hooks[0]:
        return False
    gevent = sys.modules.get("gevent")
    if gevent is None:
        return False

    def later() -> None:
        _in_child_hooks[0] = False  # the hooks are over: the hub runs
        start()

    gevent.spawn(later)
    return True


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_before_fork, after_in_parent=_after_fork_in_parent,
                        after_in_child=_resume_in_child)


def install(at_exit: Callable[[], None],
            own_batches: Callable[[], list[Any]] = list) -> None:
    """Register the fork hook (once per process; ``instrument()`` calls it).  ``at_exit``
    ends what a forked worker still has open before it flushes (``instrument()``'s exit
    hook: passed in, as set-up sits above this module); ``own_batches`` looks up the batch
    processors of the exports set-up built (their threads stop for a fork)."""
    global _registered, _worker_exit, _own_batches
    _worker_exit = at_exit
    _own_batches = own_batches
    if not _registered and hasattr(os, "register_at_fork"):
        os.register_at_fork(after_in_child=_after_in_child)
        _registered = True
        if sys.version_info >= (3, 12) and not getattr(os.fork, "__agent_latency_fork__",
                                                       False):
            os.fork = _fork_resuming_after(os.fork)
