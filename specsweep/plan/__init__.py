"""Stage resolve_plan / preflight: what to measure, checked and resolved into launch plans.

``config``: loading and checking config files (schema, semantics, duplicate
keys). ``resolve``: one explicit launch plan per configuration.
"""
