"""Renderers: a Report in, text out. No analysis happens here."""
