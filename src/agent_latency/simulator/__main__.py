"""``python -m agent_latency.simulator`` = ``agent-latency simulate``."""

import sys

from ._cli import main

sys.exit(main())
