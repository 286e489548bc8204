"""kvlint's static half: find K/V drift in attention source code before it runs."""

__version__ = "0.1.0"
