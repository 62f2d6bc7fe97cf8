"""Message kinds: the engine starts and completes only what a registry tells it to, and knows no launch types."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from kernbench.sim import ComponentError, ComponentRegistry, MessageError, MessageKind
from kernbench.sim.messages import TRANSFER_KINDS
from kernbench.topology import naming as nm


@dataclass(frozen=True)
class PingMsg:
    """A test message: a zero-byte control message from the host to one SRAM."""

    cube: int


def _start_ping(engine, req):
    path = engine.router.control_path(nm.HOST, nm.sram(0, req.msg.cube))
    req.source = nm.HOST
    req.op_name = "ping"
    engine.send_control(req, path, req.msg)


def _complete_ping(engine, req):
    engine.oplog.record(req.t_submit, req.t_end, req.source, "control", "ping", {"cube": req.msg.cube})


class PingSink:
    """Mixed into the test SRAM: finishes a ping's request when it arrives."""

    def on_control(self, payload, t, transfer):
        self.engine.finish(transfer.request, t + self.overhead_ns)


def _registry(test_impls, *kinds):
    sink = type("PingSram", (PingSink, dict(test_impls)["sram"]), {"__slots__": ()})
    impls = [(n, sink if n == "sram" else c) for n, c in test_impls]
    return ComponentRegistry(impls, kinds)


def test_a_registered_kind_is_started_and_completed_by_its_handlers(make_engine, test_impls):
    eng = make_engine(reg=_registry(test_impls, MessageKind(PingMsg, _start_ping, _complete_ping)))
    req = eng.submit(PingMsg(1))
    eng.run()
    path = eng.router.control_path(nm.HOST, nm.sram(0, 1))
    assert req.latency_ns == pytest.approx(eng.control_latency_ns(path) + eng.components[path[0]].overhead_ns
                                           + eng.components[path[-1]].overhead_ns)
    (row,) = [r for r in eng.oplog.records if r.op_name == "ping"]
    assert (row.op_kind, row.params, row.t_end) == ("control", {"cube": 1}, req.t_end)


def test_an_unregistered_message_lists_the_registered_kinds(make_engine, test_impls):
    eng = make_engine()
    with pytest.raises(MessageError, match=r"cannot submit PingMsg; supported: MemoryWriteMsg, .*McpuDmaWriteMsg$"):
        eng.submit(PingMsg(0))
    eng = make_engine(reg=_registry(test_impls, MessageKind(PingMsg, _start_ping)))
    assert eng.submit(PingMsg(0)).corr_id == 1


def test_a_kind_is_registered_once_and_survives_replace(test_impls):
    kind = MessageKind(PingMsg, _start_ping)
    reg = ComponentRegistry(test_impls, [kind])
    with pytest.raises(ComponentError, match="PingMsg already has a registered kind"):
        reg.register_message(MessageKind(PingMsg, _start_ping))
    assert reg.replace("sram", object).message_kinds == (kind,)


def test_the_engine_package_has_no_launch_or_kernel_types():
    import kernbench.sim as sim

    names = {name.lower() for name in dir(sim)}
    assert not any("launch" in n or "kernel" in n for n in names)
    assert [k.msg_type.__name__ for k in TRANSFER_KINDS] == ["MemoryWriteMsg", "MemoryReadMsg", "PeDmaWriteMsg",
                                                             "PeDmaReadMsg", "McpuDmaWriteMsg"]
