"""The site's build code: MkDocs hooks, the figures and what they share (not the package).

A package of its own beside ``attnlab``, so that its modules import each other as
``hooks.<module>`` from anywhere, with no ``sys.path`` edit: ``scripts/install.py``
installs it editable (``hooks/pyproject.toml``) wherever it sets up the site. It is not
in the published wheel (pyproject.toml packages ``src/`` only).

MkDocs loads the entry files that ``mkdocs.yml``'s ``hooks:`` list names by path, under
their stem (``figures``, ``roadmap``, ...): those import what they share from
``hooks.<module>`` (the figure registry, the build cache, the page parser), and no
module imports an entry file, so each module is loaded once, under one name
(tests/site/test_hooks_package.py).
"""
