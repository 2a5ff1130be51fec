"""Package discovery for setuptools: every package under `opscope/`, plus the top-level
`dialect/` and `passes/` folders installed as `opscope.dialect` and `opscope.passes`.

Everything else about the project is in pyproject.toml. Packages are found, not listed, so
a new room is in the wheel the moment it has an `__init__.py` (tests/test_packaging.py
builds the wheel and checks that every module of the tree is in it).
"""

from setuptools import find_packages, setup

# Top-level folders of the checkout installed under the `opscope` package (the design card's layout).
MOUNTED = {"dialect": "opscope.dialect", "passes": "opscope.passes"}

packages = ["opscope", *(f"opscope.{p}" for p in find_packages("opscope"))]
package_dir = {"opscope": "opscope"}
for folder, name in MOUNTED.items():
    packages += [name, *(f"{name}.{p}" for p in find_packages(folder))]
    package_dir[name] = folder

setup(packages=packages, package_dir=package_dir)
