"""kernbench.sim — the discrete-event engine, fabric, op log, message kinds and component registry."""

from importlib import metadata as _metadata

from kernbench.sim.component import Component, ComponentRegistry
from kernbench.sim.engine import GraphEngine, Request
from kernbench.sim.errors import BudgetError, ComponentError, DeadlockError, MessageError, SimulationLimitError
from kernbench.sim.fabric import Packet, Route, Transfer, Wire
from kernbench.sim.limits import Limits
from kernbench.sim.links import LinkRecord
from kernbench.sim.messages import (
    McpuDmaWriteMsg,
    MemoryReadMsg,
    MemoryWriteMsg,
    MessageKind,
    PeDmaReadMsg,
    PeDmaWriteMsg,
)
from kernbench.sim.oplog import OpLog, OpRecord
from kernbench.sim.protocol import Completion, Engine

__all__ = [
    "BudgetError",
    "Completion",
    "Component",
    "ComponentError",
    "ComponentRegistry",
    "DeadlockError",
    "Engine",
    "GraphEngine",
    "Limits",
    "LinkRecord",
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
    "SimulationLimitError",
    "Transfer",
    "Wire",
    "__version__",
]

__version__ = _metadata.version("kernbench-sim")
