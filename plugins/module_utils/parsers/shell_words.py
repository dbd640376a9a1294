"""A line split into words as a POSIX shell splits it, as ``shlex.split`` does (quotes, backslashes), in time linear
in the line: ``shlex`` grows each word a character at a time by string concatenation, and a 256 KB word took a
second (a 1 MB QEMU ``args`` value a quarter of a minute). Same words, same errors (``ShellWordsError``, a
``ValueError`` as shlex's, with shlex's messages).
"""

from __future__ import annotations

import re

from ansible_collections.gpuhost.gpu.plugins.module_utils.parsers._common import ParseError

_WHITESPACE = " \t\r\n"
# What may follow a backslash inside double quotes and lose the backslash (shlex's escapedquotes and escape).
_ESCAPED_IN_DOUBLE = '"\\'
_PLAIN = re.compile(r"[^ \t\r\n'\"\\]+")


class ShellWordsError(ParseError):
    """A line a shell cannot split: a quote not closed, a backslash with nothing after it."""


def shell_words(line: str) -> list[str]:
    """The words of ``line`` as ``shlex.split(line)`` gives them; ``ShellWordsError`` ("No closing quotation", "No
    escaped character") where it raises ``ValueError``."""
    words: list[str] = []
    word: list[str] = []
    in_word = False  # a word has started (an empty quoted word counts)
    at, end = 0, len(line)
    while at < end:
        char = line[at]
        if char in _WHITESPACE:
            if in_word:
                words.append("".join(word))
                word, in_word = [], False
            at += 1
        elif char == "\\":
            if at + 1 >= end:
                raise ShellWordsError("No escaped character")
            word.append(line[at + 1])
            in_word = True
            at += 2
        elif char == "'":
            close = line.find("'", at + 1)
            if close < 0:
                raise ShellWordsError("No closing quotation")
            word.append(line[at + 1:close])
            in_word = True
            at = close + 1
        elif char == '"':
            at = _double_quoted(line, at + 1, word)
            in_word = True
        else:
            plain = _PLAIN.match(line, at)
            word.append(plain.group(0))
            in_word = True
            at = plain.end()
    if in_word:
        words.append("".join(word))
    return words


def _double_quoted(line: str, at: int, word: list[str]) -> int:
    """Read a double-quoted part from just after its opening quote into ``word``; where it ends."""
    end = len(line)
    while True:
        quote = line.find('"', at)
        backslash = line.find("\\", at, quote if quote >= 0 else end)
        if backslash < 0:
            if quote < 0:
                raise ShellWordsError("No closing quotation")
            word.append(line[at:quote])
            return quote + 1
        word.append(line[at:backslash])
        if backslash + 1 >= end:
            raise ShellWordsError("No escaped character")
        escaped = line[backslash + 1]
        word.append(escaped if escaped in _ESCAPED_IN_DOUBLE else "\\" + escaped)
        at = backslash + 2
