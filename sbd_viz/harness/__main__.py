"""``python -m sbd_viz.harness run --model sbd_viz ...``: lm-eval's command line with sbd_viz's model and tasks."""

import sys

from .cli import main

sys.exit(main())
