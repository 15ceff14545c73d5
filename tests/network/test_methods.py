"""One object's methods replaced for a while (``net._methods``): what the taps on a
connection's reads stand on."""

from __future__ import annotations

import asyncio
import dis
import socket
import sys
from typing import Any, ClassVar

import pytest

from agent_latency.instrumentation.net._methods import (
    is_replaced,
    is_stand_in,
    replace_methods,
    restore_methods,
    stand_in_attribute,
    stand_in_protocol,
    stood_for,
)

specialising = pytest.mark.skipif(sys.version_info < (3, 11),
                                  reason="specialisation came with 3.11")


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
    """Remembers every attribute name set on its objects, and whether ``__class__`` was."""

    set_names: ClassVar[list[str]] = []

    def __setattr__(self, name: str, value: Any) -> None:
        Recording.set_names.append(name)
        super().__setattr__(name, value)


class Connection:
    """What keeps a stream, as httpcore's HTTP/1.1 connection keeps ``_network_stream``."""

    def __init__(self, stream: Any) -> None:
        self._network_stream = stream
        self.state = "idle"

    def receive(self) -> str:
        return self._network_stream.read(1)


def _tap(connection: Connection) -> Any:
    return stand_in_attribute(connection, "_network_stream",
                              {"read": lambda n: f"tap {n}"})


class TestStandInAttribute:
    """A stand-in in the owner's attribute answers the replaced methods; the object is put back
    after, never changed."""

    def test_called_instead_and_put_back(self) -> None:
        stream = Stream("a")
        connection = Connection(stream)
        undo = _tap(connection)
        assert undo is not None and is_stand_in(connection._network_stream)
        assert connection.receive() == "tap 1"
        assert connection._network_stream.write("x") == "a wrote x"  # (not named: its own)
        assert connection._network_stream.name == "a"  # attributes are the object's
        assert stood_for(connection._network_stream) is stream
        undo()
        assert connection._network_stream is stream
        assert connection.receive() == "a read 1"
        assert type(stream) is Stream and vars(stream) == {"name": "a", "sock": stream.sock}

    def test_attributes_set_through_it_land_on_the_object(self) -> None:
        stream = Stream("a")
        connection = Connection(stream)
        undo = _tap(connection)
        connection._network_stream.name = "b"
        undo()
        assert stream.name == "b"

    def test_the_object_is_never_touched(self) -> None:
        stream = Recording("a")
        Recording.set_names.clear()
        connection = Connection(stream)
        undo = _tap(connection)
        connection.receive()
        undo()
        assert Recording.set_names == []
        assert type(stream) is Recording

    def test_a_caller_that_kept_the_stand_in_gets_the_objects_own_methods(self) -> None:
        connection = Connection(Stream("a"))
        undo = _tap(connection)
        kept = connection._network_stream  # another thread took it, then the tap ended
        undo()
        assert kept.read(2) == "a read 2"

    def test_undo_leaves_a_stream_put_there_since(self) -> None:
        connection = Connection(Stream("a"))
        undo = _tap(connection)
        replacement = Stream("b")
        connection._network_stream = replacement  # (the connection reconnected meanwhile)
        undo()
        assert connection._network_stream is replacement

    def test_refused_where_there_is_no_object_or_a_stand_in_already(self) -> None:
        assert _tap(Connection(None)) is None
        connection = Connection(Stream("a"))
        undo = _tap(connection)
        assert _tap(connection) is None
        assert connection.receive() == "tap 1"
        undo()

    def test_one_class_per_set_of_names(self) -> None:
        first, second = Connection(Stream("a")), Connection(Stream("b"))
        undos = [_tap(first), _tap(second)]
        assert type(first._network_stream) is type(second._network_stream)
        for undo in undos:
            undo()


def _warm_site(obj: Any, site: Any) -> list[str]:
    for _ in range(200):  # warm: the adaptive interpreter specialises after a few runs
        site(obj)
    return [i.opname for i in dis.get_instructions(site, adaptive=True)
            if "ATTR" in i.opname or "METHOD" in i.opname]


def _stream_site(stream: Any) -> str:
    return stream.read(1) + stream.name


def _connection_site(connection: Any) -> Any:
    return connection._network_stream, connection.state


@specialising
class TestNothingSlowerAfter:
    """After a tap the tapped object and its owner are read at the speed they were: CPython
    keeps specialising their attribute reads and method calls (a method set on the object,
    a swapped class or a ``__dict__`` asked for would keep it from doing so, for good)."""

    def test_the_tapped_object_and_its_owner(self) -> None:
        class Fresh(Stream):
            pass

        stream = Fresh("a")
        connection = Connection(stream)
        undo = _tap(connection)
        connection.receive()
        undo()
        assert _warm_site(stream, _stream_site) == _warm_site(Fresh("b"), _stream_site)
        assert _warm_site(connection, _connection_site) == _warm_site(
            Connection(Fresh("c")), _connection_site)
        assert any("WITH_VALUES" in name for name in _warm_site(stream, _stream_site))

    def test_the_check_can_fail(self) -> None:
        """What the older ways left behind is seen by the same check."""

        class Fresh(Stream):
            pass

        class Sub(Fresh):
            __slots__ = ()

        swapped, untouched = Fresh("a"), Fresh("b")
        swapped.__class__ = Sub
        swapped.__class__ = Fresh
        assert _warm_site(swapped, _stream_site) != _warm_site(untouched, _stream_site)


class _Echo(asyncio.Protocol):
    """A protocol that keeps what it was handed."""

    def __init__(self) -> None:
        self.received: list[bytes] = []
        self.lost = False

    def data_received(self, data: bytes) -> None:
        self.received.append(data)

    def connection_lost(self, exc: BaseException | None) -> None:
        self.lost = True


class TestStandInProtocol:
    """A stand-in in an event loop's transport (``set_protocol``) sees the bytes the loop
    hands over; the protocol is back in the transport after."""

    def test_sees_the_bytes_and_puts_the_protocol_back(self) -> None:
        async def main() -> tuple[Any, ...]:
            ours, theirs = socket.socketpair()
            loop = asyncio.get_running_loop()
            transport, protocol = await loop.create_connection(_Echo, sock=ours)
            seen: list[bytes] = []

            def data_received(data: bytes) -> None:
                seen.append(data)
                protocol.data_received(data)

            undo = stand_in_protocol(transport, {"data_received": data_received})
            assert undo is not None and is_stand_in(transport.get_protocol())
            theirs.sendall(b"first")
            while not protocol.received:
                await asyncio.sleep(0.01)
            undo()
            back = transport.get_protocol()
            theirs.sendall(b"second")
            while len(protocol.received) < 2:
                await asyncio.sleep(0.01)
            theirs.close()
            while not protocol.lost:  # (forwarded, not named: the protocol's own)
                await asyncio.sleep(0.01)
            transport.close()
            return seen, protocol.received, back is protocol

        seen, received, back = asyncio.run(main())
        assert seen == [b"first"] and received == [b"first", b"second"] and back

    def test_connection_lost_while_tapped_reaches_the_protocol(self) -> None:
        async def main() -> bool:
            ours, theirs = socket.socketpair()
            loop = asyncio.get_running_loop()
            transport, protocol = await loop.create_connection(_Echo, sock=ours)
            undo = stand_in_protocol(transport, {"data_received": protocol.data_received})
            theirs.close()
            for _ in range(200):
                if protocol.lost:
                    break
                await asyncio.sleep(0.01)
            assert undo is not None
            undo()
            return protocol.lost

        assert asyncio.run(main())

    def test_a_buffered_protocol_is_refused(self) -> None:
        class Buffered(asyncio.BufferedProtocol):
            def get_buffer(self, sizehint: int) -> bytearray:
                return bytearray(1024)

            def buffer_updated(self, nbytes: int) -> None:
                pass

        async def main() -> Any:
            ours, theirs = socket.socketpair()
            loop = asyncio.get_running_loop()
            transport, _ = await loop.create_connection(Buffered, sock=ours)
            undo = stand_in_protocol(transport, {"data_received": lambda data: None})
            transport.close()
            theirs.close()
            return undo

        assert asyncio.run(main()) is None

    def test_a_transport_without_set_protocol_is_refused(self) -> None:
        class Fixed:
            def get_protocol(self) -> Any:
                return _Echo()

        assert stand_in_protocol(Fixed(), {"data_received": lambda data: None}) is None


class TestClassSwap:
    """The older way, for an object whose dict is not kept in its class's shared keys
    (``socket.SocketIO``'s): its class swapped for a subclass while tapped."""

    def test_socketio_replaced_and_restored(self) -> None:
        ours, theirs = socket.socketpair()
        raw = socket.SocketIO(ours, "rb")
        try:
            assert replace_methods(raw, {"readinto": lambda buffer: 0})
            assert is_replaced(raw) and raw.readinto(bytearray(1)) == 0
            assert isinstance(raw, socket.SocketIO)
            assert type(raw).__name__ == "SocketIO"
            restore_methods(raw)
            assert type(raw) is socket.SocketIO and not is_replaced(raw)
            theirs.sendall(b"x")
            buffer = bytearray(1)
            assert raw.readinto(buffer) == 1 and buffer == b"x"
        finally:
            raw.close()
            ours.close()
            theirs.close()

    @specialising
    def test_an_object_whose_attributes_its_class_keeps_is_refused(self) -> None:
        stream = Stream("a")
        assert not replace_methods(stream, {"read": lambda n: "tap"})
        assert type(stream) is Stream and stream.read(1) == "a read 1"

    def test_an_object_without_a_dict_is_refused_and_left_alone(self) -> None:
        class Slotted:
            __slots__ = ("x",)

            def read(self) -> str:
                return "slotted"

        obj = Slotted()
        assert not replace_methods(obj, {"read": lambda: "tap"})
        assert type(obj) is Slotted and obj.read() == "slotted"

    def test_restore_of_an_object_never_replaced_does_nothing(self) -> None:
        stream = Stream("a")
        restore_methods(stream)
        assert type(stream) is Stream
