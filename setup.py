"""Packaging: the fixed top-level folders install as one namespace, so nothing generic lands in site-packages.

``[project]`` in pyproject.toml holds the metadata; this file only maps folders to packages, which pyproject's
static ``package-dir`` cannot do for every subpackage without listing each by hand.
"""

from setuptools import find_packages, setup

NAMESPACE = {
    "ferrymq": "layers/ferrymq/python/ferrymq",
    "ferrymq.frontend": "functions/frontend",
    "ferrymq.metadata": "functions/metadata",
    "ferrymq.storage": "storage_workers",
    "ferrymq.infra": "infra",
    "ferrymq.spark": "spark",
}


def _packages() -> list[str]:
    found = []
    for package, folder in NAMESPACE.items():
        found.append(package)
        found.extend(f"{package}.{sub}" for sub in find_packages(folder))
    return sorted(found)


setup(packages=_packages(), package_dir=NAMESPACE)
