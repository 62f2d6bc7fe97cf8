"""What a kernel has in flight, and the waits that keep its reads and writes in order.

Three kinds of asynchronous work can still be touching a kernel's memory:

* *fills* — a lazy ``tl.load`` or a ``tl.recv_async`` writing a TCM tensor
  (``tl.load_rows``: several DMAs); the tensor's first reader waits for them
  (``TensorHandle.ready``, an event or a tuple of events);
* *composites* — in flight with the byte ranges they read and write; an
  operation that reads a range a composite writes, or writes a range it reads
  or writes, waits for it first;
* every other event nobody waited for yet (a send's delivery), which the
  kernel's end drains.

Every wait goes through the kernel's issuer; an event whose value is an
exception raises :class:`~kernbench.tl.tensors.TLError` in the kernel.
"""

from __future__ import annotations

from kernbench.components.pe.composite_cmd import overlaps
from kernbench.tl.issue import Issuer
from kernbench.tl.tensors import TensorHandle, TLError


class Hazards:
    """The in-flight work of one kernel: pending events, fills by scratch offset, composites by byte range."""

    __slots__ = ("composites", "fills", "issuer", "pending", "where")

    def __init__(self, issuer: Issuer, where: str) -> None:
        self.issuer = issuer
        self.where = where
        self.pending: list = []  # events of issued, not yet waited-for asynchronous commands
        self.fills: list[tuple[int, object]] = []  # (target scratch offset, event) of fills not yet awaited
        self.composites: list[tuple[object, tuple, tuple]] = []  # (done, read ranges, write ranges) in flight

    def block(self, event) -> None:
        """Wait for ``event``; forget it; raise its failure in the kernel."""
        self.issuer.wait(event)
        if event in self.pending:
            self.pending.remove(event)
        if isinstance(event.value, Exception):
            raise TLError(f"{self.where}: {event.value}")

    def track(self, event) -> None:
        """Remember an event the kernel's end must wait for."""
        self.pending.append(event)

    def track_fill(self, h: TensorHandle, event, offset: int) -> None:
        """``h`` (at scratch ``offset``) is being filled until ``event``: its readers wait."""
        h.ready = event
        self.pending.append(event)
        self.fills.append((offset, event))

    def track_composite(self, event, reads: tuple, writes: tuple) -> None:
        """A composite reading ``reads`` and writing ``writes`` (``(start, end)`` byte ranges) is in flight."""
        self.pending.append(event)
        self.composites.append((event, reads, writes))

    def await_ready(self, *handles) -> None:
        """Wait for the fills of any of ``handles`` still being filled."""
        for h in handles:
            if isinstance(h, TensorHandle) and h.ready is not None:
                ev, h.ready = h.ready, None
                if type(ev) is tuple:  # a tile filled by several DMAs (tl.load_rows)
                    for e in ev:
                        self.block(e)
                    self.fills = [(off, e) for off, e in self.fills if e not in ev]
                    continue
                self.block(ev)
                self.fills = [(off, e) for off, e in self.fills if e is not ev]

    def sync(self, start: int, end: int, write: bool) -> None:
        """Wait for in-flight composites that write ``[start, end)`` (or, for a write, also read it)."""
        if not self.composites:
            return
        for entry in list(self.composites):
            ev, reads, writes = entry
            if ev.processed:
                self.composites.remove(entry)
            elif overlaps(start, end, writes) or (write and overlaps(start, end, reads)):
                self.block(ev)
                self.composites.remove(entry)

    def sync_reads(self, handles) -> None:
        """Wait for composites writing any of ``handles`` (about to be read)."""
        if not self.composites:
            return
        for h in handles:
            if isinstance(h, TensorHandle):
                self.sync(h.addr, h.addr + h.span, write=False)

    def release(self, offset: int, lo: int, hi: int) -> None:
        """Scratch from ``offset`` (addresses ``[lo, hi)``) is being released: wait for fills into it and for
        composites touching it."""
        for off, ev in list(self.fills):
            if off >= offset:
                self.block(ev)
        self.fills = [(off, ev) for off, ev in self.fills if off < offset]
        for ev, reads, writes in list(self.composites):
            if overlaps(lo, hi, reads) or overlaps(lo, hi, writes):
                self.block(ev)

    def drain(self) -> None:
        """Wait for everything still pending."""
        for ev in list(self.pending):
            self.block(ev)
