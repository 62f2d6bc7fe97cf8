"""kernbench.layers — the model layers the benches and studies are built from, callable from host code with a
runtime context (a bench's ``torch``):

- :mod:`kernbench.layers.attention` — fused grouped-query attention across PEs and cubes (decode and prefill),
  and the kernel-side flash-attention loop (:mod:`kernbench.layers.attention.local`) every attention kernel uses,
  the single-PE decode bench included;
- :mod:`kernbench.layers.ffn` — the dense SwiGLU feed-forward layer, tensor-parallel over the PEs and cubes of a
  SIP (its partials summed in the kernel over the PE_IPCQ) and over SIPs (with the all-reduce);
- :mod:`kernbench.layers.moe` — the mixture-of-experts layer: host-side routing (top-k, synthetic distributions,
  capacity), experts over SIPs (expert parallelism) and PEs (whole or tensor-parallel), dispatch and combine
  all-to-alls;
- :mod:`kernbench.layers.tp` — Megatron-style tensor-parallel linear layers over ranks (one SIP each), on the
  ``torch.distributed`` of :mod:`kernbench.ccl`.

Shipped by kernbench-benches (ADR 0037): layers are libraries, not benches, so bench discovery never looks here.
"""
