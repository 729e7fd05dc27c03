"""Helpers the test folders share: fixtures, stand-in servers, subprocess and CLI runners."""
