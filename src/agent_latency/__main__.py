"""``python -m agent_latency`` runs the ``agent-latency`` command."""

import sys

from .cli import main

sys.exit(main())
