"""Pushing to agents that hold no connection: signed webhooks and OpenClaw gateways."""
