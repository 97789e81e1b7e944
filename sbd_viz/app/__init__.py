"""The Gradio app: ``main`` serves it, ``build_demo`` builds it, ``Handlers`` answers its events.

``page`` holds the page and its handlers, ``state`` the controls they read and the session they keep, ``serving``
its queue lines and keys; ``inputs`` checks what a control sends, ``views`` renders the metrics and texts,
``panels`` the failure and ladder tables, ``compare`` the Compare decoders tab, ``curve`` the speed-quality
curve."""

from .curve import SpeedQualityCurve
from .launch import main
from .page import DEFAULTS, EXAMPLES, Handlers, build_demo, example_label

__all__ = ["DEFAULTS", "EXAMPLES", "Handlers", "SpeedQualityCurve", "build_demo", "example_label", "main"]
