"""Synestra: offline forensics for AI training clusters (library; the CLI lives in synestra_cli.cli)."""

__version__ = "0.4.0"
