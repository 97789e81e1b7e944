"""The static site: the demo with no server. ``export_site`` writes a folder of plain files (every prompt's exact γ
map precomputed, drawn by the app's own scrubber in the page) that a browser opens from the disk and any static
server, or a static Hugging Face Space, serves: docs/static_site.md.

``entries`` precomputes one prompt, ``page`` writes the page and the README, ``glossary`` the glossary's HTML,
``export`` the folder."""

from .export import Site, export_site

__all__ = ["Site", "export_site"]
