"""The web UI: a FastAPI app over the same library calls as the CLI (`infraplan ui`)."""
