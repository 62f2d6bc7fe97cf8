"""``kernbench web``: an interactive viewer of a compiled topology and of a run's link traffic.

The viewer is plain HTML, SVG and JavaScript shipped in ``assets/`` (no build
step, nothing fetched from the internet). :mod:`.model` turns the graph, a
run summary and a links file into the JSON the page reads; :mod:`.server`
serves it with the standard library on loopback; :mod:`.export` writes the
same page as static files that open without a server.
"""

from kernbench.cli.web.export import export_viewer
from kernbench.cli.web.model import ViewerInputError, graph_payload
from kernbench.cli.web.server import PortInUseError, ViewerServer, ViewerState, is_loopback

__all__ = ["PortInUseError", "ViewerInputError", "ViewerServer", "ViewerState", "export_viewer", "graph_payload",
           "is_loopback"]
