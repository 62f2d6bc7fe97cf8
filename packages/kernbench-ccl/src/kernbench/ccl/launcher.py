"""The rank = SIP launcher: ``torch.multiprocessing.spawn(worker, nprocs=n)`` and device binding.

Each rank runs ``worker(rank, *args)`` in its own greenlet, bound to SIP
``rank`` (``torch.ahbm.set_device`` / ``torch.accelerator.set_device_index``
rebind it). Ranks share one simulated machine and one clock, so the
launcher schedules them cooperatively: whenever a rank has to wait for the
device (a deployment, a launch, a read back), it hands its requests to the
launcher and steps aside; once every live rank is waiting, the launcher runs
the simulation until some rank's requests are complete and resumes those
ranks, in rank order. A collective first meets at a *rendezvous*
(:meth:`Launcher.rendezvous`): the ranks are released together once all of
them have arrived, so they submit their launches at the same simulated time
and host-side skew (one rank's deployment finishing later) is not counted
as collective time. If the simulation runs dry while ranks still wait, that
is a :class:`~kernbench.sim.errors.DeadlockError`.
"""

from __future__ import annotations

from collections.abc import Callable

from greenlet import GreenletExit, getcurrent, greenlet

from kernbench.runtime import RuntimeApiError, RuntimeContext


class _Rendezvous:
    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


class Launcher:
    """``torch.multiprocessing``: spawns rank greenlets and knows which rank the caller is."""

    def __init__(self, ctx: RuntimeContext) -> None:
        self.ctx = ctx
        self._rank_of: dict = {}  # greenlet -> rank
        self._nprocs = 0

    def rank_of(self, glet=None) -> int | None:
        """The rank of ``glet`` (default: the caller), or None outside spawned workers."""
        return self._rank_of.get(glet or getcurrent())

    @property
    def nprocs(self) -> int:
        """Ranks of the running spawn (0 when none is running)."""
        return self._nprocs

    def spawn(self, fn: Callable, args: tuple = (), nprocs: int = 1, join: bool = True) -> None:
        """Run ``fn(rank, *args)`` for ranks ``0..nprocs-1``, one greenlet each, until all have returned.

        The first exception raised by a rank is re-raised here (with its rank
        named) after the other ranks are stopped.
        """
        sips = self.ctx.spec.system.sips.count
        if isinstance(nprocs, bool) or not isinstance(nprocs, int) or not 1 <= nprocs <= sips:
            raise RuntimeApiError(f"spawn: nprocs must be 1..{sips} (one rank per SIP), got {nprocs!r}")
        if not join:
            raise RuntimeApiError("spawn: join=False is not supported; the ranks run to completion inside spawn")
        if self._nprocs:
            raise RuntimeApiError("spawn: ranks are already running; spawn cannot be nested")
        ctx = self.ctx
        ranks = [greenlet(lambda r=r: fn(r, *args)) for r in range(nprocs)]
        for r, g in enumerate(ranks):
            self._rank_of[g] = r
            ctx.bind_device(r, g)
        waiting: dict = {}
        self._nprocs = nprocs
        previous_hook = ctx.wait_hook
        ctx.wait_hook = self._hand_over
        try:
            runnable = list(ranks)
            while True:
                for g in runnable:
                    try:
                        out = g.switch()
                    except Exception as exc:
                        exc.add_note(f"raised by rank {self._rank_of[g]} of torch.multiprocessing.spawn")
                        raise
                    if not g.dead:
                        waiting[g] = out
                if not waiting:
                    return
                meeting = {g: w for g, w in waiting.items() if isinstance(w, _Rendezvous)}
                if meeting and len(meeting) == sum(not g.dead for g in ranks):
                    gone = [self._rank_of[g] for g in ranks if g.dead]
                    if gone:
                        name = next(iter(meeting.values())).name
                        raise RuntimeApiError(f"ranks {sorted(self._rank_of[g] for g in meeting)} wait in {name} but "
                                              f"rank(s) {gone} returned without calling it; every rank must call it")
                    names = sorted({w.name for w in meeting.values()})
                    if len(names) > 1:
                        raise RuntimeApiError(f"ranks reached different collectives at once ({', '.join(names)}); "
                                              f"every rank must call the same collectives in the same order")
                    runnable = [g for g in ranks if g in meeting]
                    for g in runnable:
                        del waiting[g]
                    continue
                groups = [w for w in waiting.values() if not isinstance(w, _Rendezvous)]
                ctx.engine.wait_any(groups)
                runnable = [g for g in ranks if g in waiting and not isinstance(waiting[g], _Rendezvous)
                            and all(r.t_end is not None for r in waiting[g])]
                for g in runnable:
                    del waiting[g]
        finally:
            ctx.wait_hook = previous_hook
            self._nprocs = 0
            for g in ranks:
                if not g.dead:
                    g.throw(GreenletExit)
                self._rank_of.pop(g, None)
                ctx.unbind_device(g)

    def rendezvous(self, name: str) -> None:
        """Wait until every running rank has called ``rendezvous`` (for the same collective ``name``); outside
        spawned workers it returns at once."""
        me = getcurrent()
        if me in self._rank_of:
            me.parent.switch(_Rendezvous(name))

    def _hand_over(self, requests: list) -> bool:
        """The runtime's wait hook: a rank gives its wait to the launcher's loop."""
        me = getcurrent()
        if me not in self._rank_of:
            return False
        me.parent.switch(list(requests))
        return True


class DeviceApi:
    """``torch.ahbm`` / ``torch.accelerator``: bind the calling rank to a SIP."""

    def __init__(self, ctx: RuntimeContext) -> None:
        self.ctx = ctx

    def set_device(self, device: int) -> None:
        """Make SIP ``device`` the caller's device."""
        self.ctx.bind_device(device)

    def set_device_index(self, device: int) -> None:
        """Alias of :meth:`set_device` (the ``torch.accelerator`` spelling)."""
        self.ctx.bind_device(device)

    def current_device(self) -> int:
        """The caller's SIP."""
        return self.ctx.device

    def device_count(self) -> int:
        """SIPs in the topology."""
        return self.ctx.spec.system.sips.count
