"""`opscope view`: Model Explorer's server started with a model's graph and a run's overlays loaded.

Model Explorer (`ai-edge-model-explorer`) is the optional extra `[viewer]`: imported only
here, on first use, so the core never needs it. Its Python package runs without its C++
adapter (`ai-edge-model-explorer-adapter`, which only its TF/TFLite/StableHLO converters
use): our graph is JSON, which its web app parses itself (`/api/v1/read_text_file`), so
`pip install --no-deps ai-edge-model-explorer` and its small pure-Python dependencies
(flask, dacite, portpicker, termcolor, watchdog, requests, packaging) serve it as well.
The server listens on `host` (127.0.0.1 by default: nothing outside this machine reaches
it) until Ctrl+C; its address, printed by Model Explorer, carries the graph and every
node-data file in its `data=` parameter, so the page opens with them loaded.
"""

from __future__ import annotations

import socket
import tempfile
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

from opscope.errors import OpscopeError
from opscope.explorer.export import GRAPH_NAME, NODE_DATA_DIR, export_graph

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8080  # Model Explorer's own: taken, it tries 8081 .. 8099
VIEWER_EXTRA = "pip install 'opscope[viewer]'"
SHOWN_FIRST = "density.lhs"  # the overlay the page opens with: how sparse each site's activations are


def model_explorer() -> ModuleType:
    """The `model_explorer` package, or a one-line error saying how to install it."""
    try:
        import model_explorer as me
    except ImportError as e:
        raise OpscopeError(
            f"opscope view needs Model Explorer (the viewer extra, {e.name} is missing): {VIEWER_EXTRA}"
        ) from None
    return me


def view(
    source,
    *,
    out: str | Path | None = None,
    host: str = DEFAULT_HOST,
    port: int = DEFAULT_PORT,
    browser: bool = True,
    progress: Callable[[str], None] | None = None,
) -> None:
    """Serve `source`'s graph in Model Explorer until Ctrl+C: a folder `opscope graph` wrote, or
    what `opscope graph` takes (a model or a run folder; written to `out`, else a temporary folder)."""
    me = model_explorer()  # before anything slow
    if port != DEFAULT_PORT and _in_use(host, port):
        raise OpscopeError(f"port {port} on {host} is in use: give another port")
    folder = Path(source) if isinstance(source, (str, Path)) and (Path(source) / GRAPH_NAME).is_file() else None
    with tempfile.TemporaryDirectory(prefix="opscope-view-") as tmp:
        if folder is None:
            folder = export_graph(source, out if out is not None else tmp, progress=progress).out_dir
        config = me.config().add_model_from_path(str((folder / GRAPH_NAME).resolve()))
        for path in sorted((folder / NODE_DATA_DIR).glob("*.json"), key=lambda p: (p.stem == SHOWN_FIRST, p.name)):
            config.add_node_data_from_path(str(path.resolve()))  # the page shows the last one loaded
        if progress is not None:
            progress(f"Model Explorer on {host} with {folder / GRAPH_NAME}; Ctrl+C stops it")
        me.visualize_from_config(config, host=host, port=port, no_open_in_browser=not browser)


def _in_use(host: str, port: int) -> bool:
    """Whether something listens on `host`:`port` (Model Explorer would exit on it)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.settimeout(1.0)
        return s.connect_ex((host, port)) == 0
