"""Endpoint settings, declared once: the schema (:mod:`gateway.settings.schema`: every setting's
name, converter, default, help and placement), the syntax of values
(:mod:`~gateway.settings.convert`), the rules between settings
(:mod:`~gateway.settings.checks`) and the files settings name (:mod:`~gateway.settings.files`)."""
