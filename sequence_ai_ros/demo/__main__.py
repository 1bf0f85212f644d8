"""`python -m sequence_ai_ros.demo`: see sequence_ai_ros/demo/run.py."""

import sys

from sequence_ai_ros.demo.run import main

sys.exit(main())
