"""Helpers shared by the test suites that run real processes (tests/integration, trainer/tests)."""
