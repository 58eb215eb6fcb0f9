"""Every MCP_* setting the code reads is in docs/deploy.md's MCP table with its default and what it does, and the
README points to MCP servers in its one line."""

from __future__ import annotations

import re

from tests.processes import REPO_ROOT

SETTINGS = REPO_ROOT / "opencompany" / "settings" / "base.py"
DEPLOY = REPO_ROOT / "docs" / "deploy.md"


def _mcp_table() -> dict[str, tuple[str, str]]:
    text = DEPLOY.read_text()
    section = text.split('<a id="mcp-settings"></a>', 1)[1].split("\n## ", 1)[0]
    rows = {}
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) == 3 and (name := re.fullmatch(r"`(MCP_[A-Z_]+)`", cells[0])):
            rows[name.group(1)] = (cells[1], cells[2])
    return rows


def test_every_mcp_setting_is_in_the_deploy_table_with_a_default_and_a_meaning():
    names = set(re.findall(r"^(MCP_[A-Z_]+)\s*=", SETTINGS.read_text(), re.MULTILINE))
    assert "MCP_STDIO_IDLE_SECONDS" in names and len(names) >= 12
    table = _mcp_table()
    assert names <= set(table), f"not in docs/deploy.md: {sorted(names - set(table))}"
    assert set(table) <= names, f"documented but not a setting: {sorted(set(table) - names)}"
    for name, (default, meaning) in table.items():
        assert default and len(meaning) > 20, name


def test_the_documented_defaults_are_the_settings_defaults():
    source = SETTINGS.read_text()
    table = _mcp_table()
    for name, (default, _) in table.items():
        call = re.search(rf"^{name}\s*=\s*env_int\(\"{name}\",\s*([^,)]+)", source, re.MULTILINE)
        if call:
            assert f"`{eval(call.group(1), {})}`" in default, (name, default)  # noqa: S307 (a literal like 4 * 1024)


def test_the_readme_has_its_line_on_mcp_servers():
    lines = [line for line in (REPO_ROOT / "README.md").read_text().splitlines() if "**MCP servers**" in line]
    assert len(lines) == 1 and "MCP server" in lines[0]
