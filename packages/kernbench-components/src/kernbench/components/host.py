"""The host CPU on the tray: where requests start and launches end (hop 1 and the last hop of a launch).

The host runtime submits memory writes and reads (H2D / D2H over PCIe) and
kernel launches (:class:`~kernbench.components.launch.KernelLaunchMsg`, one
:class:`~kernbench.components.launch.SipLaunch` per SIP to its IO_CPU). A
launch completes when every SIP has reported back; a failure is carried to
the host, which reports the first failing PE in (sip, cube, pe) order.
"""

from __future__ import annotations

from kernbench.components.launch import KernelError, LaunchReport, launch_result, pe_order
from kernbench.components.requester import Requester


class HostCpu(Requester):
    """The host CPU: issues H2D writes, D2H reads and kernel launches over PCIe; completes launches."""

    __slots__ = ()

    def on_control(self, payload: object, t: float, transfer) -> None:
        """Record a SIP's reports; finish the launch request after the last one."""
        if not isinstance(payload, LaunchReport):
            super().on_control(payload, t, transfer)
        req = transfer.request
        result = launch_result(req)
        for r in payload.reports:
            result.reports[r.pe] = r
        req.pending -= 1
        if req.pending == 0:
            failures = sorted((r for r in result.reports.values() if r.error is not None), key=pe_order)
            if failures:
                r = failures[0]
                req.error = KernelError(f"kernel {result.kernel!r} failed on {r.pe}: {r.error}")
            self.engine.finish(req, t)
