"""The engines behind one interface (``registry.Engine``): their argv, preflight and log evidence.

``reference.py`` is specsweep's own PyTorch engine (``specsweep.refengine``),
``sglang/`` is SGLang's launch_server in the images. ``registry.get_engine``
is the only place that lists them; engine modules never import it.
"""
