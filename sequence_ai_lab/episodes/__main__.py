"""`python -m sequence_ai_lab.episodes list | show | plot | frames | repair | export-lerobot`."""

import sys

from sequence_ai_lab.episodes.tools import main

sys.exit(main())
