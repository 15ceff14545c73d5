"""One object's methods replaced for a while (a connection's reads tapped), without touching
its class or any other object of it.

The object's class is swapped for a subclass whose methods of those names call the
replacements, kept on the object, and swapped back after.  Setting the methods on the object
itself would be simpler and costs every object of its class for good: CPython (3.11) adds
the name to the class's shared instance keys, after which ``obj.read(...)`` is no longer
specialised for any object of that class (a call site that read an httpcore stream ran
~20 % slower, and the openai SDK benchmark's per-chunk figure carried it once the first
stream had been tapped).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: The attribute the replacements are kept under, on the object, while they are in place
#: (``forward`` spells it out: read as an attribute there, not through ``getattr``, once
#: per tapped read).
_REPLACED = "_agent_latency_methods"

#: The subclass made for each (class, names): made once, reused by every object of it.
_SUBCLASSES: dict[tuple[type, tuple[str, ...]], type] = {}
#: Each of those subclasses, to the class it stands in for.
_ORIGINAL: dict[type, type] = {}


def _forward(base: type, name: str) -> Callable[..., Any]:
    def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        try:
            method = self._agent_latency_methods[name]
        except (AttributeError, KeyError):  # restored by another thread meanwhile
            return getattr(base, name)(self, *args, **kwargs)
        return method(*args, **kwargs)

    forward.__name__ = forward.__qualname__ = name
    return forward


def _subclass(cls: type, names: tuple[str, ...]) -> type:
    key = (cls, names)
    sub = _SUBCLASSES.get(key)
    if sub is None:
        namespace: dict[str, Any] = {name: _forward(cls, name) for name in names}
        # Same name, module and layout: what the program sees of the object is unchanged
        # (``isinstance``, ``type(obj).__name__``, its attributes), and ``__class__`` may be
        # assigned.
        namespace.update(__slots__=(), __module__=cls.__module__,
                         __qualname__=getattr(cls, "__qualname__", cls.__name__))
        sub = _SUBCLASSES[key] = type(cls.__name__, (cls,), namespace)
        _ORIGINAL[sub] = cls
    return sub


def is_replaced(obj: Any) -> bool:
    """Some of ``obj``'s methods are replaced now."""
    return type(obj) in _ORIGINAL


def replace_methods(obj: Any, methods: dict[str, Callable[..., Any]]) -> bool:
    """Call ``methods`` (name to function, called without ``obj``) in place of ``obj``'s own
    methods of those names until :func:`restore_methods`; False where ``obj`` cannot be
    given a subclass (a built-in type, a layout that refuses ``__class__`` assignment) or
    has some replaced already."""
    cls = type(obj)
    if cls in _ORIGINAL:
        return False
    try:
        sub = _subclass(cls, tuple(sorted(methods)))
        setattr(obj, _REPLACED, methods)
        obj.__class__ = sub
    except (TypeError, AttributeError):
        try:
            delattr(obj, _REPLACED)
        except AttributeError:
            pass
        return False
    return True


def restore_methods(obj: Any) -> None:
    """``obj``'s own methods back (nothing where none were replaced)."""
    original = _ORIGINAL.get(type(obj))
    if original is None:
        return
    obj.__class__ = original
    try:
        delattr(obj, _REPLACED)
    except AttributeError:
        pass
