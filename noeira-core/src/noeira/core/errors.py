"""Errors a user can cause and fix. The CLI prints them as one line and exits with code 2."""

from __future__ import annotations


class NoeiraError(Exception):
    """Base of every error noeira raises on purpose."""


class UserError(NoeiraError):
    """Bad input from the user: a wrong name, key, value, path or missing install."""


class UnknownPluginError(UserError, LookupError):
    """A registry name that no installed distribution provides."""


class PluginLoadError(UserError, ImportError):
    """A plugin that is installed but fails to import or build."""


class ConfigError(UserError, ValueError):
    """A configuration key or value that is wrong; the message starts with its dotted path."""


class CaptureError(NoeiraError, RuntimeError):
    """A step that cannot be recorded as a graph."""


class Terminated(Exception):  # noqa: N818 (a signal, as KeyboardInterrupt)
    """A run was asked to stop by SIGTERM (a batch scheduler, ``timeout``, ``kill``) and stopped
    at an iteration's end with a checkpoint; the CLI exits with 143 (128 + SIGTERM)."""
