"""A kernel's scratch arena: the top of its PE's TCM, handed out bump-pointer style with nested scopes.

Intermediate results of ``tl`` operations live here. Allocations are
16-byte aligned; a scope (``tl.scratch_scope``) remembers the cursor when it
opens and rewinds to it when it closes, so a loop body's temporaries are
reused every iteration. Tensors allocated in a closed scope are *dead*: their
bytes may already belong to someone else.
"""

from __future__ import annotations

from kernbench.tl.tensors import TLError

SCRATCH_ALIGN = 16


class ScratchOverflowError(TLError):
    """A kernel needed more TCM scratch than the topology's ``pe.tcm.scratch_mib``."""


class ScratchArena:
    """Bump allocator over ``[base, base + capacity)`` (encoded TCM addresses, bytes) with nested scopes."""

    __slots__ = ("_dead", "_next_scope", "_scopes", "base", "capacity", "cursor", "where")

    def __init__(self, base: int, capacity: int, where: str) -> None:
        self.base = base
        self.capacity = capacity
        self.where = where  # "kernel 'k' on PE (s, c, p)", for error messages
        self.cursor = 0
        self._scopes: list[tuple[int, int]] = [(0, 0)]  # (scope id, cursor at entry)
        self._next_scope = 1
        self._dead: set[int] = set()

    @property
    def scope(self) -> int:
        """The id of the innermost open scope (0 = the kernel's outermost)."""
        return self._scopes[-1][0]

    @property
    def nested(self) -> bool:
        """Whether any scope is open."""
        return len(self._scopes) > 1

    def alloc(self, nbytes: int) -> int:
        """The address of ``nbytes`` fresh bytes; :class:`ScratchOverflowError` when they do not fit."""
        start = -(-self.cursor // SCRATCH_ALIGN) * SCRATCH_ALIGN
        if start + nbytes > self.capacity:
            raise ScratchOverflowError(
                f"{self.where}: needs {nbytes} more bytes of TCM scratch but only {self.capacity - start} of "
                f"{self.capacity} are left; use smaller tiles or raise pe.tcm.scratch_mib in the topology")
        self.cursor = start + nbytes
        return self.base + start

    def open(self) -> tuple[int, int]:
        """Open a scope; returns ``(scope id, cursor at entry)`` for :meth:`close`."""
        sid = self._next_scope
        self._next_scope += 1
        self._scopes.append((sid, self.cursor))
        return sid, self.cursor

    def close(self, sid: int, start: int) -> None:
        """Close scope ``sid``: its tensors die and the cursor rewinds to ``start``."""
        self._scopes.pop()
        self._dead.add(sid)
        self.cursor = start

    def is_dead(self, sid: int) -> bool:
        """Whether scope ``sid`` has closed."""
        return sid in self._dead
