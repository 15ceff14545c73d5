"""One object's methods replaced for a while (a connection's reads tapped), without changing
the object, its class or any other object of it.

A **stand-in** takes the object's place where its owner keeps it: the connection's
attribute that holds its stream (:func:`stand_in_attribute`), the transport's protocol
(:func:`stand_in_protocol`, through asyncio's ``set_protocol``).  The stand-in answers the
replaced methods itself and hands every other attribute to the object; when the tap ends
the object goes back in its place, and a caller that took the stand-in meanwhile (another
thread) gets the object's own methods from it.

Why not on the object: CPython (3.11+) keeps a plain object's attributes in its class's
shared keys or, once its dict is asked for or its ``__class__`` assigned, in a dict of its
own, for good.  A method set on the object puts the name in the shared keys, after which
``obj.read(...)`` is no longer specialised for any object of the class (a call site that
read an httpcore stream ran ~20 % slower); a subclass swapped in and out leaves that one
object with a dict, after which its attribute reads and method calls go the slow way (on
3.12 not specialised at all): a pooled connection's every later read paid it.  The owner's
attribute, set to the stand-in and back, is a value replaced in place, which costs nothing
after.

An object that has no such dict (``socket.SocketIO``, whose dict is its C base's) keeps the
older way, its class swapped for a subclass while tapped (:func:`replace_methods`): nothing
else can be changed there, since what holds it (a buffered reader's ``raw``) is read-only.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

Undo = Callable[[], None]

#: The stand-in class for each set of method names.
_STAND_INS: dict[tuple[str, ...], type] = {}


class _StandIn:
    """Base of the stand-ins: the object (``_target``), its replacements (``_methods``, None
    once retired); any other attribute is the object's."""

    # (``__weakref__``: a library may keep a weak reference to what it is handed)
    __slots__ = ("__weakref__", "_methods", "_target")

    def __init__(self, target: Any, methods: dict[str, Callable[..., Any]] | None) -> None:
        object.__setattr__(self, "_target", target)
        object.__setattr__(self, "_methods", methods)

    def __getattr__(self, name: str) -> Any:
        return getattr(object.__getattribute__(self, "_target"), name)

    def __setattr__(self, name: str, value: Any) -> None:
        setattr(object.__getattribute__(self, "_target"), name, value)

    def __repr__(self) -> str:
        return repr(object.__getattribute__(self, "_target"))


def _forward(name: str) -> Callable[..., Any]:
    def forward(self: Any, *args: Any, **kwargs: Any) -> Any:
        methods = self._methods
        if methods is None:  # retired: a caller took the stand-in before it was put back
            return getattr(self._target, name)(*args, **kwargs)
        return methods[name](*args, **kwargs)

    forward.__name__ = forward.__qualname__ = name
    return forward


def _stand_in(target: Any, methods: dict[str, Callable[..., Any]]) -> Any:
    names = tuple(sorted(methods))
    cls = _STAND_INS.get(names)
    if cls is None:
        namespace: dict[str, Any] = {name: _forward(name) for name in names}
        namespace["__slots__"] = ()
        cls = _STAND_INS[names] = type("StandIn", (_StandIn,), namespace)
    return cls(target, methods)


def is_stand_in(obj: Any) -> bool:
    """``obj`` is a stand-in (a tapped object's, in its place now)."""
    return isinstance(obj, _StandIn)


def stood_for(stand_in: Any) -> Any:
    """The object ``stand_in`` stands in for."""
    return object.__getattribute__(stand_in, "_target")


def _retire(stand_in: Any) -> None:
    object.__setattr__(stand_in, "_methods", None)


def stand_in_attribute(owner: Any, attribute: str,
                       methods: dict[str, Callable[..., Any]]) -> Undo | None:
    """A stand-in for ``owner.<attribute>`` put there, calling ``methods`` (name to
    function, called without the object) in place of the object's own; how to put the
    object back, or None where the attribute is missing or a stand-in already."""
    target = getattr(owner, attribute, None)
    if target is None or is_stand_in(target):
        return None
    stand_in = _stand_in(target, methods)
    try:
        setattr(owner, attribute, stand_in)
    except (AttributeError, TypeError):
        return None

    def undo() -> None:
        _retire(stand_in)
        if getattr(owner, attribute, None) is stand_in:
            setattr(owner, attribute, target)

    return undo


def stand_in_protocol(transport: Any, methods: dict[str, Callable[..., Any]]) -> Undo | None:
    """A stand-in for ``transport``'s protocol (an event loop's transport: ``get_protocol``
    and ``set_protocol``), as :func:`stand_in_attribute`.  Not for a buffered protocol (the
    transport asks it for buffers: ``isinstance`` at ``set_protocol``), nor a transport that
    cannot change its protocol."""
    try:
        protocol = transport.get_protocol()
        if protocol is None or is_stand_in(protocol) or hasattr(protocol, "get_buffer"):
            return None
        stand_in = _stand_in(protocol, methods)
        transport.set_protocol(stand_in)
    except (AttributeError, NotImplementedError, TypeError):
        return None

    def undo() -> None:
        _retire(stand_in)
        try:
            if transport.get_protocol() is stand_in:
                transport.set_protocol(protocol)
        except (AttributeError, NotImplementedError, TypeError):
            pass

    return undo


# -- the older way, for an object without a dict of its own kind ---------------------------------
#: The attribute the replacements are kept under while a class is swapped (``forward`` in
#: :func:`_class_forward` spells it out: read as an attribute, once per tapped read).
_REPLACED = "_agent_latency_methods"
#: The subclass made for each (class, names), and each such subclass's original class.
_SUBCLASSES: dict[tuple[type, tuple[str, ...]], type] = {}
_ORIGINAL: dict[type, type] = {}
#: A class whose objects keep their attributes in the class's shared keys (3.11+): one the
#: class swap would leave with a dict of its own (``Py_TPFLAGS_MANAGED_DICT``).
_MANAGED_DICT = 1 << 4 if sys.version_info >= (3, 11) else 0


def _class_forward(base: type, name: str) -> Callable[..., Any]:
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
        namespace: dict[str, Any] = {name: _class_forward(cls, name) for name in names}
        # Same name, module and layout: what the program sees of the object is unchanged
        # (``isinstance``, ``type(obj).__name__``, its attributes), and ``__class__`` may be
        # assigned.
        namespace.update(__slots__=(), __module__=cls.__module__,
                         __qualname__=getattr(cls, "__qualname__", cls.__name__))
        sub = _SUBCLASSES[key] = type(cls.__name__, (cls,), namespace)
        _ORIGINAL[sub] = cls
    return sub


def is_replaced(obj: Any) -> bool:
    """Some of ``obj``'s methods are replaced now (:func:`replace_methods`)."""
    return type(obj) in _ORIGINAL


def replace_methods(obj: Any, methods: dict[str, Callable[..., Any]]) -> bool:
    """Call ``methods`` (name to function, called without ``obj``) in place of ``obj``'s own
    methods of those names until :func:`restore_methods`, its class swapped for a subclass;
    False where that would cost the object (its attributes in its class's shared keys:
    use a stand-in), it cannot be given a subclass (a built-in type, a layout that refuses
    ``__class__`` assignment, no ``__dict__`` to keep the replacements in) or has some
    replaced already."""
    cls = type(obj)
    if cls in _ORIGINAL or cls.__flags__ & _MANAGED_DICT:
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
