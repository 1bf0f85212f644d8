"""Helpers shared by the test suites: import them as ``from support.<module> import ...``.

Test folders hold tests and conftests only; everything a test imports lives here.
"""
