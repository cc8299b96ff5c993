"""Everything Snakemake-shaped, in two rooms.

``inputs``: rule inputs and params (light: imported at every Snakemake start
by ``rules/common.smk``). ``jobs``: the adapters ``scripts/*.py`` call, one per
rule with a script. Both take what they need explicitly: no global ``config``.
"""
