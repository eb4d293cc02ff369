"""The package list, found rather than listed: mobiperf/ and its subpackages, and collectors/, analyzers/ and
reports/ with theirs, installed inside mobiperf (setup.cfg's package_dir maps those folders). setup.cfg's `find:`
cannot rename a folder's packages, hence this file; everything else is in setup.cfg."""

from setuptools import find_packages, setup

MAPPED = ("collectors", "analyzers", "reports")   # PyPI names: never installed at the top level

packages = find_packages(include=["mobiperf", "mobiperf.*"])
for folder in MAPPED:
    packages += [f"mobiperf.{name}" for name in find_packages(include=[folder, f"{folder}.*"])]

setup(packages=packages)
