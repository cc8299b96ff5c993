# Container images: one build job per entry under `images:`, and a `push`
# target. The logic lives in specsweep.docker; scripts/*.py only adapt.
#
# Rerun contract: the job's params are the image's own spec (content keys, as
# canonical JSON) and its content-addressed tag (a hash of the Dockerfile,
# patches, build args, target and every context file the Dockerfile reads).
# So editing another image or a configuration changes nothing here, editing
# this image's build args or sources rebuilds only this image, and the
# manifest keeps its mtime when its content is unchanged (configurations that
# use the image do not rerun).

from specsweep.docker import content_spec_json, image_tag


def image_spec_json(wildcards):
    """This image's entry under `images:` (content keys only), canonical JSON."""
    return content_spec_json(config["images"][wildcards.image])


def image_content_tag(wildcards):
    """specsweep/<image>:<12 hex>, computed from the bytes that go into the build."""
    return image_tag(wildcards.image, config["images"][wildcards.image], workflow.basedir)


def all_image_manifests(wildcards):
    return [f"results/images/{name}.json" for name in sorted(config.get("images") or {})]


def registry_json(wildcards):
    """The registry mapping (url, namespace, username, password_env: a variable NAME)."""
    return content_spec_json(config.get("registry") or {})


rule build_image:
    input:
        preflight_of_image_users,
    output:
        "results/images/{image}.json",
    params:
        spec=image_spec_json,
        tag=image_content_tag,
    log:
        "results/images/logs/build_{image}.log",
    benchmark:
        "results/images/logs/build_{image}.tsv"
    localrule: True
    conda:
        "../envs/specsweep.yaml"
    script:
        "../scripts/build_image.py"


rule push_images:
    input:
        all_image_manifests,
    output:
        "results/images/pushed.json",
    params:
        registry=registry_json,
    log:
        "results/images/logs/push_images.log",
    localrule: True
    conda:
        "../envs/specsweep.yaml"
    script:
        "../scripts/push_images.py"


rule push:
    input:
        "results/images/pushed.json",
    localrule: True
