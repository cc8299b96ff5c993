"""specsweep: find out which communication setup makes speculative decoding pay.

All logic lives in this package; Snakemake rules and ``scripts/`` only call it.
"""

__version__ = "0.1.0"

# Bump when a deliberate change to how measurement works must rerun every
# configuration. It is part of every resolved launch plan, so changing it
# invalidates exactly the benchmark jobs (not image builds).
#   2  raw records v2 (output token ids, prompt keys, acceptance histograms), datasets, chat.
HARNESS_VERSION = 2
