"""One object's methods replaced for a while (``net._methods``): what the taps on a
connection's reads stand on."""

from __future__ import annotations

import dis
import sys
from typing import Any, ClassVar

import pytest

from agent_latency.instrumentation.net._methods import (
    is_replaced,
    replace_methods,
    restore_methods,
)


class Stream:
    """A library's stream class, as httpcore's: a plain class whose objects have a dict."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.sock = object()

    def read(self, n: int) -> str:
        return f"{self.name} read {n}"

    def write(self, data: str) -> str:
        return f"{self.name} wrote {data}"


class Recording(Stream):
    """Remembers every attribute name set on its objects."""

    set_names: ClassVar[list[str]] = []

    def __setattr__(self, name: str, value: Any) -> None:
        Recording.set_names.append(name)
        super().__setattr__(name, value)


class Slotted:
    """No ``__dict__``: nothing can be kept on the object."""

    __slots__ = ("x",)

    def read(self) -> str:
        return "slotted"


def _reads(stream: Any) -> str:
    return stream.read(1)


class TestReplaced:
    """The replacements are called in place of the object's own methods, on that object only."""

    def test_called_instead_and_restored(self) -> None:
        tapped, other = Stream("a"), Stream("b")
        assert replace_methods(tapped, {"read": lambda n: f"tap {n}"})
        assert is_replaced(tapped) and not is_replaced(other)
        assert tapped.read(3) == "tap 3"
        assert tapped.write("x") == "a wrote x"  # (a method not named stays the class's)
        assert other.read(3) == "b read 3"
        restore_methods(tapped)
        assert not is_replaced(tapped)
        assert tapped.read(3) == "a read 3"
        assert type(tapped) is Stream
        assert "read" not in vars(tapped) and "_agent_latency_methods" not in vars(tapped)

    def test_what_the_program_sees_is_unchanged(self) -> None:
        stream = Stream("a")
        replace_methods(stream, {"read": lambda n: "tap"})
        assert isinstance(stream, Stream)
        assert type(stream).__name__ == "Stream"
        assert type(stream).__module__ == Stream.__module__
        assert stream.name == "a"
        restore_methods(stream)

    def test_one_subclass_per_class_and_names(self) -> None:
        a, b = Stream("a"), Stream("b")
        replace_methods(a, {"read": lambda n: "a"})
        replace_methods(b, {"read": lambda n: "b"})
        assert type(a) is type(b)
        assert (a.read(0), b.read(0)) == ("a", "b")
        restore_methods(a)
        restore_methods(b)

    def test_no_attribute_of_the_methods_names_is_set_on_the_object(self) -> None:
        Recording.set_names.clear()
        stream = Recording("a")
        Recording.set_names.clear()
        replace_methods(stream, {"read": lambda n: "tap", "write": lambda d: "tap"})
        restore_methods(stream)
        assert "read" not in Recording.set_names and "write" not in Recording.set_names

    def test_twice_is_refused(self) -> None:
        stream = Stream("a")
        assert replace_methods(stream, {"read": lambda n: "first"})
        assert not replace_methods(stream, {"read": lambda n: "second"})
        assert stream.read(0) == "first"
        restore_methods(stream)

    def test_an_object_without_a_dict_is_refused_and_left_alone(self) -> None:
        obj = Slotted()
        assert not replace_methods(obj, {"read": lambda: "tap"})
        assert type(obj) is Slotted and obj.read() == "slotted"

    def test_restore_of_an_object_never_replaced_does_nothing(self) -> None:
        stream = Stream("a")
        restore_methods(stream)
        assert type(stream) is Stream

    def test_restored_between_a_callers_lookup_and_its_call(self) -> None:
        stream = Stream("a")
        replace_methods(stream, {"read": lambda n: "tap"})
        # A caller found the forwarding method; another thread restores the object before
        # the forwarding method runs: the class's own method answers, no AttributeError.
        forwarding = type(stream).read
        restore_methods(stream)
        assert forwarding(stream, 2) == "a read 2"


def _read_site_after(tap_and_untap: Any) -> str:
    """The instruction that looks ``read`` up at a warm call site, reading an object of a
    class one of whose other objects went through ``tap_and_untap``."""

    class Fresh(Stream):
        pass

    def call_site(stream: Any) -> str:
        return stream.read(1)

    tap_and_untap(Fresh("tapped"))
    other = Fresh("other")
    for _ in range(200):  # warm: the adaptive interpreter specialises after a few runs
        call_site(other)
    return next(i.opname for i in dis.get_instructions(call_site, adaptive=True)
                if i.argval == "read")


@pytest.mark.skipif(sys.version_info < (3, 11), reason="specialisation came with 3.11")
class TestOtherObjectsKeepTheirSpeed:
    """Replacing one object's method leaves the call sites of its class's other objects
    specialised (a method set on an object would keep CPython from specialising
    ``obj.read(...)`` for its whole class, for good)."""

    def test_call_site_still_specialised(self) -> None:
        def tap_and_untap(stream: Any) -> None:
            replace_methods(stream, {"read": lambda n: "tap"})
            stream.read(1)
            restore_methods(stream)

        assert "WITH_VALUES" in _read_site_after(tap_and_untap)

    def test_the_simpler_way_would_not_be(self) -> None:
        """The check above can fail: a method set on one object and removed again."""

        def set_and_removed(stream: Any) -> None:
            stream.read = lambda n: "tap"
            del stream.read

        assert "WITH_VALUES" not in _read_site_after(set_and_removed)
