"""The nine blocks of a PE, one module per block, and the commands and plans that flow between them.

The blocks: PE_CPU (:mod:`~kernbench.components.pe.cpu`, runs the kernel body), PE_SCHEDULER
(:mod:`~kernbench.components.pe.scheduler`, dispatches every command), PE_DMA
(:mod:`~kernbench.components.pe.dma`, moves bytes over the fabric), PE_FETCH_STORE, PE_GEMM and PE_MATH
(:mod:`~kernbench.components.pe.engines`, driven through the compute path of
:mod:`~kernbench.components.pe.stages`), PE_TCM (:mod:`~kernbench.components.pe.tcm`, the local memory with
separate read and write channels), PE_MMU (:mod:`~kernbench.components.pe.mmu`, virtual-to-physical
translation filled by map messages) and PE_IPCQ (:mod:`~kernbench.components.pe.ipcq`, receive rings and
credits for PE-to-PE messages). Around them: the command records a kernel issues
(:mod:`~kernbench.components.pe.commands`, :mod:`~kernbench.components.pe.operand`,
:mod:`~kernbench.components.pe.math_kinds`) and the composite command with its planner and pipelined run
(:mod:`~kernbench.components.pe.composite_cmd`, :mod:`~kernbench.components.pe.composite_plan`,
:mod:`~kernbench.components.pe.composite_run`).
"""
