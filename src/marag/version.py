"""The package version, at the ground floor so that records (index manifests, run directories)
can name it without importing the package's top-level API."""

__version__ = "0.1.0"
