"""kernbench.sim — the discrete-event engine, fabric, op log, message kinds and component registry."""

from importlib import metadata as _metadata

from kernbench.sim.component import Component, ComponentRegistry
from kernbench.sim.engine import GraphEngine, LinkStats, Request
from kernbench.sim.errors import ComponentError, DeadlockError, MessageError
from kernbench.sim.fabric import Packet, Route, Transfer, Wire
from kernbench.sim.messages import (
    McpuDmaWriteMsg,
    MemoryReadMsg,
    MemoryWriteMsg,
    MessageKind,
    PeDmaReadMsg,
    PeDmaWriteMsg,
)
from kernbench.sim.oplog import OpLog, OpRecord

__all__ = [
    "Component",
    "ComponentError",
    "ComponentRegistry",
    "DeadlockError",
    "GraphEngine",
    "LinkStats",
    "McpuDmaWriteMsg",
    "MemoryReadMsg",
    "MemoryWriteMsg",
    "MessageError",
    "MessageKind",
    "OpLog",
    "OpRecord",
    "Packet",
    "PeDmaReadMsg",
    "PeDmaWriteMsg",
    "Request",
    "Route",
    "Transfer",
    "Wire",
    "__version__",
]

__version__ = _metadata.version("kernbench-sim")
