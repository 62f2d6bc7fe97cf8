"""The shipped topologies as package data (read through :mod:`kernbench.topology.builtins`).

``default.yaml`` is the repository's ``topologies/topology.yaml``; the
``6sip_2x3_*`` files are the three 6-SIP study configurations;
``16sip_4x4_torus_2d.yaml`` is a 16-SIP scale configuration (engine-speed benchmarks). The copies in
the repository's ``topologies/`` folder are the editable source; a test keeps
the two identical.
"""
