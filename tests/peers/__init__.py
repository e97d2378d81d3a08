"""Traces of one tool-call story written by other projects' real instrumentations (see README.md)."""
