# Container images: one build job per entry under `images:`, and a `push`
# target. The logic lives in specsweep.images; scripts/*.py only adapt.
#
# Rerun contract: the job's params are the image's own spec (content keys, as
# canonical JSON) and its content-addressed tag (a hash of the Dockerfile,
# patches, build args, target and every context file the Dockerfile reads).
# So editing another image or a configuration changes nothing here, editing
# this image's build args or sources rebuilds only this image, and the
# manifest keeps its mtime when its content is unchanged (configurations that
# use the image do not rerun).

# No input on purpose. Depending on the users' preflight.json through ancient()
# (to build only after preflight passed) breaks the rerun contract: when a
# preflight reruns, Snakemake 9 (dag.py update_needrun) masks every job
# downstream of it and then skips jobs linked to it only by ancient files
# without evaluating their own triggers, so a build-arg change that also
# reruns preflight would not rebuild the image and the benchmark would run
# the old one. Without the edge, the params trigger below always decides.
rule build_image:
    output:
        "results/images/{image}.json",
    params:
        spec=image_spec_json,
        tag=image_tag,
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
        image_manifests,
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
