"""Erasure and export: every row that names one destination, deleted or listed
(docs/privacy.md)."""
