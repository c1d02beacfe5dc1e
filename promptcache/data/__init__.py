"""Bundled, dated data tables (price table, model minimum cacheable prefixes).

A package (not a bare folder) so that setuptools ships the ``*.toml`` files in wheels through
the ``"*" = ["*.toml", ...]`` package-data pattern in pyproject.toml. Read them with
``importlib.resources.files("promptcache").joinpath("data/<name>.toml")``.
"""
