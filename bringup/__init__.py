"""Decide: compatibility tables, settings and the node plan. Pure Python, no I/O."""
