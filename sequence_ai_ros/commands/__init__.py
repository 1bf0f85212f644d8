"""The output stages that publish what the gate passed (joint, Cartesian, grouped; one shared
base) and the dry run that plays them nowhere."""
