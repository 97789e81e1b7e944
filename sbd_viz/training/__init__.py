"""Training an SBD model: the data (``data``), the paper's objective (``objective``), the loop and its CLI
(``train``), and growing a trained model into a larger one (``upscale``)."""
