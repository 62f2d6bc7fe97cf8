"""``kernbench.layers.attention`` — fused grouped-query attention across PEs and cubes, callable from host code.

A library, not a bench: benches and studies call it with a runtime context
(a bench's ``torch``). Shapes follow PyTorch: ``q`` is ``(C, Hq, Tq, d)``,
``k`` and ``v`` are ``(C, Hkv, S, d)``, numpy float16, with ``C`` users and
``G = Hq / Hkv`` query heads per KV head.

- :func:`gqa_decode` — ``Tq = 1``, six partitionings (:data:`PARTITIONS`).
- :func:`gqa_prefill` — ``Tq <= S`` query rows, causal (bottom-right aligned), ``short`` or ``ring``
  (:data:`MODES`).
- :class:`AttentionResult` — output, latency window, op counts, engine occupancy, IPCQ messages, KV bytes per
  cube, active PEs and the launch results.
- :func:`attention_reference` — the numpy reference the kernels are tested against.

The design is recorded in ADR 0018 (partitionings, reduce trees, user
placement, measurement) and ADR 0019 (ring prefill and the causal mask).
"""

from kernbench.layers.attention.decode import gqa_decode
from kernbench.layers.attention.errors import AttentionConfigError, AttentionError, AttentionShapeError
from kernbench.layers.attention.prefill import MODES, gqa_prefill
from kernbench.layers.attention.reference import attention_reference, causal_visible
from kernbench.layers.attention.result import AttentionResult
from kernbench.layers.attention.tree_plan import PARTITIONS, VARIANTS

__all__ = [
    "MODES", "PARTITIONS", "VARIANTS", "AttentionConfigError", "AttentionError", "AttentionResult",
    "AttentionShapeError", "attention_reference", "causal_visible", "gqa_decode", "gqa_prefill",
]
