"""``kernbench web --export DIR``: the viewer as static files that open from disk without a server.

The page, its scripts and style are copied unchanged; ``data.js`` carries the
graph, the run and the links as one JavaScript object (browsers do not let a
page opened from ``file://`` fetch JSON beside it). Runs cannot be started
from an exported page. Only ``DIR`` is written.
"""

from __future__ import annotations

import json
from pathlib import Path

from kernbench.cli.web.model import ViewerInputError, graph_payload
from kernbench.cli.web.server import ASSETS, asset
from kernbench.topology import TopologyGraph


def export_viewer(graph: TopologyGraph, out_dir: str | Path, *, run: object = None, links: dict | None = None,
                  initial: dict | None = None) -> list[Path]:
    """Write ``index.html``, the scripts, the style and ``data.js`` into ``out_dir``; returns the paths."""
    out = Path(out_dir)
    data = {"graph": {**graph_payload(graph), "initial": initial or {}}, "run": run, "links": links,
            "initial": initial or {}}
    text = "window.KERNBENCH_DATA = " + json.dumps(data, separators=(",", ":")) + ";\n"
    written = []
    try:
        out.mkdir(parents=True, exist_ok=True)
        for name in ASSETS:
            (out / name).write_bytes(asset(name))
            written.append(out / name)
        (out / "data.js").write_text(text, encoding="utf-8")
    except OSError as exc:
        raise ViewerInputError(f"cannot write the viewer into {out}: {exc.strerror or exc}; choose a writable "
                               f"--export folder") from None
    written.append(out / "data.js")
    return written


__all__ = ["export_viewer"]
