"""Checkpoint rules: one per ``kvNNN_*.py`` module, like linter/rules."""
