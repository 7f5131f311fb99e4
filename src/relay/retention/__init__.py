"""Retention: verifications and messages deleted past their account's `delete_after`,
their figures kept as aggregates without a destination (docs/privacy.md)."""
