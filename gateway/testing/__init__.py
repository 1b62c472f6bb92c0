"""Helpers for testing plugins against the gateway's contracts (no pytest import here)."""
