"""Observe: pyinfra facts about GPU nodes. They parse; they never decide."""
