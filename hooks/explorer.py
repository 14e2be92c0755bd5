"""MkDocs hook: export the attention explorer's numbers at build time.

Writes ``assets/explorer-data.json`` into the built site from
``attnlab.explorer.explorer_data()``, so the explorer page shows the package's own
numbers and no JavaScript recomputes them.
"""

from __future__ import annotations

import json

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files

from attnlab.explorer import explorer_data

DATA_PATH = "assets/explorer-data.json"


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the explorer's data as a generated file (also a valid link target in the docs)."""
    content = json.dumps(explorer_data(), separators=(",", ":"))
    files.append(File.generated(config, DATA_PATH, content=content))
    return files
