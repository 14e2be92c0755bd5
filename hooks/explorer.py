"""MkDocs hook: export the attention explorer's numbers at build time.

Writes ``assets/explorer-data.json`` into the built site from
``explorer_data()`` (``hooks/explorer_data.py``), so the explorer page shows the package's own
numbers and no JavaScript recomputes them: the toy sentences' weights, the recall
models' and every head of the real model, SmolLM2 (``llm_data``).
"""

from __future__ import annotations

import json
from pathlib import Path

from mkdocs.config.defaults import MkDocsConfig
from mkdocs.structure.files import File, Files
from mkdocs.structure.pages import Page

from hooks.build_cache import cached_text, source_key
from hooks.explorer_data import explorer_data

DATA_PATH = "assets/explorer-data.json"
EXPLORER_PAGE = "explorer.md"
EXPLORER_MODULE = "assets/javascripts/explorer.js"  # the explorer's drawing, an ES module


def _data_json() -> str:
    """The explorer's data as compact JSON, once per version of its sources.

    Memoised by ``build_cache``: the recall model it shows is trained on the way, and
    the real model is loaded and run on its prompts.
    """
    return cached_text(
        "explorer-data.json",
        source_key(),
        lambda: json.dumps(explorer_data(), separators=(",", ":")),
    )


def on_files(files: Files, config: MkDocsConfig) -> Files:
    """Add the explorer's data as a generated file (also a valid link target in the docs)."""
    files.append(File.generated(config, DATA_PATH, content=_data_json()))
    return files


def on_page_content(html: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    """Inline the data and the explorer's module into the explorer page, for ``file://``.

    ``fetch`` of a local file is blocked by browsers, and so is a module script's file;
    a JSON ``<script>`` element and an inline module are not. ``</`` is escaped so the
    data cannot close the element early; the module has no ``</`` (checked).
    """
    if page.file.src_uri != EXPLORER_PAGE:
        return html
    data = _data_json().replace("</", "<\\/")
    module = (Path(config.docs_dir) / EXPLORER_MODULE).read_text(encoding="utf-8")
    if "</" in module or "<!--" in module:
        raise ValueError(f"{EXPLORER_MODULE} must not contain '</' or '<!--': it is inlined")
    return (
        f'{html}\n<script type="application/json" id="explorer-data">{data}</script>\n'
        f'<script type="module">{module}</script>\n'
    )
