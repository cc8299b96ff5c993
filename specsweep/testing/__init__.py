"""Test doubles that the tests and benchmarks use (never the package itself)."""
