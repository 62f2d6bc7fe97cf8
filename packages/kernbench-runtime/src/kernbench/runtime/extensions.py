"""Runtime extensions: named host-API namespaces (``torch.distributed``, ...) that other packages provide.

A package provides one by declaring an entry point in the group
``kernbench.runtime_extensions`` whose value is a factory
``factory(torch) -> namespace`` (``kernbench-ccl`` declares ``distributed``,
``multiprocessing``, ``ahbm``, ``accelerator`` and ``install_ipcq``).
Installing the package is enough: nothing needs importing. ``torch.<name>``
builds the namespace for its context on first use. This is the only way a
higher package extends the runtime, so the runtime never imports them.

An :class:`ExtensionRegistry` can also be filled by hand (tests, embedding):
explicit registrations win over entry points. :class:`ExtensionAccess` is the
part of :class:`~kernbench.runtime.context.RuntimeContext` that looks
``torch.<name>`` up in its registry.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import metadata

from kernbench.topology.errors import KernbenchError

ENTRY_POINT_GROUP = "kernbench.runtime_extensions"

ExtensionFactory = Callable[[object], object]


class ExtensionError(KernbenchError):
    """A runtime extension is registered twice, or an installed one fails to load."""


class ExtensionRegistry:
    """Named runtime extensions: explicit registrations, then the installed entry points (loaded on first use)."""

    __slots__ = ("_entry_points", "_factories", "_group")

    def __init__(self, group: str | None = ENTRY_POINT_GROUP) -> None:
        self._factories: dict[str, ExtensionFactory] = {}
        self._group = group
        self._entry_points: dict[str, metadata.EntryPoint] | None = None

    def register(self, name: str, factory: ExtensionFactory) -> None:
        """Add a namespace; registering the same factory twice is harmless, a different one is an error."""
        if self._factories.get(name, factory) is not factory:
            raise ExtensionError(f"runtime extension {name!r} is already registered by another package")
        self._factories[name] = factory

    def _installed(self) -> dict[str, metadata.EntryPoint]:
        if self._entry_points is None:
            eps = metadata.entry_points(group=self._group) if self._group else ()
            self._entry_points = {ep.name: ep for ep in sorted(eps, key=lambda e: (e.name, e.value))}
        return self._entry_points

    def names(self) -> list[str]:
        """Every extension available: registered or installed."""
        return sorted({*self._factories, *self._installed()})

    def get(self, name: str) -> ExtensionFactory | None:
        """The factory of ``name`` (loading its entry point the first time), or None when nothing provides it.

        An installed extension that fails to import raises :class:`ExtensionError`
        naming the entry point and the reason.
        """
        factory = self._factories.get(name)
        if factory is not None:
            return factory
        ep = self._installed().get(name)
        if ep is None:
            return None
        try:
            factory = ep.load()
        except Exception as exc:
            raise ExtensionError(f"runtime extension {name!r} ({ep.value}, entry point group {self._group}) failed to "
                                 f"load: {type(exc).__name__}: {exc}") from None
        self._factories[name] = factory
        return factory


#: The registry every RuntimeContext consults by default for ``torch.<name>`` namespaces.
EXTENSIONS = ExtensionRegistry()


class ExtensionAccess:
    """``torch.<name>`` for the runtime extensions: built on first use, then kept for the context's life.

    The host class sets ``_extensions`` (name -> namespace) and ``_extension_registry`` in its ``__init__``.
    """

    def __getattr__(self, name: str):
        """``torch.distributed`` and the other runtime extensions (see :mod:`kernbench.runtime.extensions`)."""
        if name.startswith("_"):
            raise AttributeError(name)
        ext = self.__dict__.get("_extensions")
        registry = self.__dict__.get("_extension_registry")
        if ext is None or registry is None:
            raise AttributeError(name)
        if name in ext:
            return ext[name]
        factory = registry.get(name)
        if factory is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}, and no installed package "
                                 f"provides a runtime extension of that name (entry-point group "
                                 f"kernbench.runtime_extensions; available: {', '.join(registry.names()) or 'none'})")
        ext[name] = value = factory(self)
        return value
