"""The arm gate and its rules: joint rules and limits, the Cartesian space and rules, dry run,
the motion enable."""
