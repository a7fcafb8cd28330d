"""Plug-ins written against the README's idioms of 2026-12-05 (before the network-state contract), kept as they
were: tests/test_compat.py trains each. Do not edit them to follow a change: a change that breaks one breaks users'
plug-ins too, and must be listed in CHANGELOG.md with the one-line fix instead."""
