"""The CLI's last line of defence: an error's text is printed with terminal escapes shown, not acted on, and an
output path under an unknown user's home folder is one clean error."""

from __future__ import annotations

import pytest

from kernbench.cli import main as cli_main
from kernbench.cli.paths import OutputPathError, output_dir, output_file
from kernbench.topology.errors import KernbenchError


def test_an_error_message_is_printed_with_its_escapes_shown(monkeypatch, capsys):
    def boom(_args):
        raise KernbenchError("file \x1b[2J\x1b]0;owned\x07 is bad\u202e")

    monkeypatch.setattr(cli_main, "_dispatch", boom)
    assert cli_main.main(["list"]) == 2
    err = capsys.readouterr().err
    assert err == "kernbench: error: file \\x1b[2J\\x1b]0;owned\\x07 is bad\\u202e\n"
    assert "\x1b" not in err and "\u202e" not in err


@pytest.mark.parametrize("make", [output_file, output_dir])
def test_an_unknown_users_home_is_a_clean_error(make):
    with pytest.raises(OutputPathError) as info:
        make("~kernbench-no-such-user/out/t.json", "--trace")
    assert str(info.value) == ("--trace '~kernbench-no-such-user/out/t.json': ~kernbench-no-such-user names no user "
                               "with a home folder on this machine; spell the path out")
