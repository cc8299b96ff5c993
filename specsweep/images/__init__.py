"""Stage build_image / push: content-addressed images through the docker CLI.

``cli``: the one docker runner. ``tag``: what decides an image's content, and
its tag. ``build``: BuildKit builds and manifests. ``registry``: push and pull.
"""
