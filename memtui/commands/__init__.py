"""Headless subcommands, one module each (see memtui.cli)."""
