"""The package version, in a module of its own so submodules can read it without importing the package facade."""

__version__ = "0.1.0"
