"""Benchmarks (`make bench`); importable so a server can load the bench-only settings."""
