"""The examples in the package's docstrings run and say what they show."""

import doctest
import importlib

import pytest

MODULES = ["overlord._crc", "overlord.frames", "overlord.net",
           "overlord.offline", "overlord.megatron", "overlord.live",
           "overlord.torch", "overlord.cp"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    mod = importlib.import_module(name)
    failed, _ = doctest.testmod(mod, optionflags=doctest.ELLIPSIS)
    assert failed == 0


def test_some_examples_exist():
    found = sum(len(t.examples) for name in MODULES
                for t in doctest.DocTestFinder().find(importlib.import_module(name)))
    assert found >= 5
