"""Private: the API beside inference — chat (the VLM planner's model) and training jobs, with
their command-line commands."""
