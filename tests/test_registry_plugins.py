"""Plugins through the ``opct.plugins`` entry-point group (opct/registry.py): loaded once, on the first name a
registry does not find, so ``import opct`` loads none and a name a plugin adds resolves in any process; a plugin
that fails names itself and its package."""

from __future__ import annotations

import importlib.metadata
import sys
import types

import pytest

import opct.registry as registry
from opct.registry import PLUGIN_GROUP, PluginError, Registry, UnknownNameError

CALLS: list[str] = []
THINGS: Registry = Registry("thing")


def register_things() -> None:
    """A plugin's registration function: adds ``from-plugin`` (idempotent, as a plugin's must be)."""
    CALLS.append("register_things")
    if not THINGS.is_registered("from-plugin"):
        THINGS.register("from-plugin", 42)


def broken() -> None:
    raise RuntimeError("its data folder is missing")


@pytest.fixture
def plugins(monkeypatch):
    """Install entry points (name -> ``module:function``) in this test's view of the installed packages."""
    module = types.ModuleType("fake_plugin")
    module.register_things, module.broken = register_things, broken
    monkeypatch.setitem(sys.modules, "fake_plugin", module)
    monkeypatch.setattr(registry, "_loaded_plugins", None)
    CALLS.clear()
    THINGS.unregister("from-plugin")

    def install(entries: dict[str, str]) -> None:
        points = importlib.metadata.EntryPoints(
            importlib.metadata.EntryPoint(name, value, PLUGIN_GROUP) for name, value in entries.items())
        monkeypatch.setattr(importlib.metadata, "entry_points",
                            lambda group: points if group == PLUGIN_GROUP else importlib.metadata.EntryPoints(()))

    return install


def test_a_missing_name_loads_the_plugins_once_and_then_resolves(plugins) -> None:
    plugins({"things": "fake_plugin:register_things"})
    THINGS.register("built-in", 1)
    try:
        assert THINGS.get("built-in") == 1 and CALLS == []  # a name found loads nothing
        assert "from-plugin" in THINGS and THINGS.get("from-plugin") == 42
        with pytest.raises(UnknownNameError, match="from-plugin"):  # the plugin's names are listed as choices
            THINGS.get("nowhere")
        assert CALLS == ["register_things"]  # once, however many misses
        assert registry.load_plugins() == ["things"]
    finally:
        THINGS.unregister("built-in")


def test_is_registered_never_loads_a_plugin(plugins) -> None:
    plugins({"things": "fake_plugin:register_things"})
    assert not THINGS.is_registered("from-plugin") and CALLS == []


def test_a_plugin_that_fails_names_itself_and_what_to_do(plugins) -> None:
    plugins({"broken-plugin": "fake_plugin:broken"})
    with pytest.raises(PluginError, match=r"'broken-plugin' \(fake_plugin:broken.*RuntimeError: its data folder is "
                                          r"missing\. Fix or reinstall"):
        THINGS.get("anything")
