"""Saved material of a host (a bug report, pasted outputs, a directory of them): read on the controller within
limits, each piece's kind told from its content, and turned into a capture the audit replays, with an account of
what it held and what it did not show."""
