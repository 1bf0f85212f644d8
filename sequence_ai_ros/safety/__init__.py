"""The arm gate and its rules: joint rules and the limits file, the Cartesian space and rules."""
