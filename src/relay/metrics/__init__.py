"""Prometheus metrics: what the services count (`observe`), what `/metrics` answers
(`exposition`), and the shared directory of `relay serve --workers N` (`directory`).

This module imports nothing: `relay serve` prepares the multiprocess directory
before prometheus-client is loaded, since the client picks its storage on import.
"""
