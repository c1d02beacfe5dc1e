"""Compute the package list for the folders mapped in pyproject.toml's package-dir.

Everything else about the build lives in pyproject.toml. Each top-level folder of the repository
(lint_rules/, proxy/, engine/, kernels/) installs inside the one import name ``promptcache``.
"""

from setuptools import find_packages, setup

PACKAGE_DIR = {
    "promptcache": "promptcache",
    "promptcache.lint_rules": "lint_rules",
    "promptcache.proxy": "proxy",
    "promptcache.engine": "engine",
    "promptcache.kernels": "kernels",
}

packages = []
for name, folder in PACKAGE_DIR.items():
    packages.append(name)
    packages += [f"{name}.{sub}" for sub in find_packages(folder)]

setup(packages=packages, package_dir=PACKAGE_DIR)
