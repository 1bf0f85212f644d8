"""`python -m sequence_ai_ros.episodes list | show | plot | frames | repair | export-lerobot`."""

import sys

from sequence_ai_ros.episodes.tools import main

sys.exit(main())
