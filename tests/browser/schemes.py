"""Material's two colour schemes, as a reader switches between them.

Material's palette names them ``default`` (light) and ``slate`` (dark); the header's
toggle switches, and Material keeps the reader's choice for the next page.
"""

from __future__ import annotations

from typing import Any

SCHEME_JS = "document.body.getAttribute('data-md-color-scheme')"
MATERIAL_SCHEME = {"light": "default", "dark": "slate"}
# The browser's colour-scheme preference, as a page sees it.
PREFERENCE_JS = "(matchMedia('(prefers-color-scheme: dark)').matches ? 'dark' : 'light')"


def switch_scheme(page: Any, scheme: str) -> None:
    """Show ``page`` in ``scheme`` ("light" or "dark") the way a reader gets there.

    The browser's preference changes, and the header's palette toggle is clicked when
    the page is not already in that scheme (Material reads the preference only when no
    palette is stored, and the toggle stores one). The body's palette attributes then
    equal those of a page first opened with that preference.
    """
    preference, shown = page.evaluate(f"[{PREFERENCE_JS}, {SCHEME_JS}]")
    if preference != scheme:
        # Emulating a preference restyles the whole page, even an unchanged one.
        page.emulate_media(color_scheme=scheme)
    wanted = MATERIAL_SCHEME[scheme]
    if shown != wanted:
        page.locator('form[data-md-component="palette"] label:not([hidden])').click()
    page.wait_for_function(f"{SCHEME_JS} === {wanted!r}")


def schemes_from_current(page: Any) -> list[str]:
    """Both schemes, the page's current one first: a tab opens each page in the scheme
    the last one left (Material keeps the reader's choice), so no visit switches back."""
    current = "dark" if page.evaluate(SCHEME_JS) == MATERIAL_SCHEME["dark"] else "light"
    return sorted(MATERIAL_SCHEME, key=lambda name: name != current)
