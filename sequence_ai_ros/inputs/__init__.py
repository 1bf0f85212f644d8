"""The node's inputs: camera images, joint states, poses, the motion enable, image conversion,
the observation cache and the images last sent to the model."""
