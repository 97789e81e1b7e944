"""Start the sbd_viz app on the shipped model: ``python app.py`` (or ``sbd-viz app [--model DIR] [--port N]``).

The app lives in the package (``sbd_viz.app``); this file lets a Hugging Face Space run the repository
unchanged. Spaces set ``GRADIO_SERVER_NAME=0.0.0.0`` and the port; locally it serves 127.0.0.1:7860.
"""

import os

from sbd_viz.app import main

if __name__ == "__main__":
    main(host=os.environ.get("GRADIO_SERVER_NAME", "127.0.0.1"),
         port=int(os.environ.get("PORT") or os.environ.get("GRADIO_SERVER_PORT") or 7860))
