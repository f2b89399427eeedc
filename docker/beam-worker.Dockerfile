# The Beam worker image for `spanner-loader load --runner DataflowRunner` (or a portable
# Flink/Spark runner): Apache Beam's Python 3.11 SDK image with spanner-loader installed,
# compiled parts (loader/_native.c) included. Build from the repository root:
#
#   docker build -f docker/beam-worker.Dockerfile -t REGION-docker.pkg.dev/PROJECT/REPO/spanner-loader-beam:0.1.0 .
#
# and pass it with `--beam-option sdk_container_image=...` (README, "Beyond one machine").
# BEAM_VERSION must equal the launcher's apache-beam version (Beam refuses a worker whose SDK
# differs from the one that built the pipeline).
ARG BEAM_VERSION=2.77.0
FROM apache/beam_python3.11_sdk:${BEAM_VERSION}
ARG BEAM_VERSION

WORKDIR /opt/spanner-loader
COPY pyproject.toml setup.py README.md ./
COPY loader ./loader
# apache-beam named at the image's own version, so the resolver keeps Beam's pins (pyarrow,
# protobuf) instead of upgrading past them for google-cloud-spanner
RUN pip install --no-cache-dir ".[beam]" "apache-beam[gcp]==${BEAM_VERSION}" \
    && rm -rf /opt/spanner-loader/loader \
    && cd / && python -c "import loader.native as n, loader.beam.work, loader.plan; s = n.status(); print('compiled parts:', s); assert s.startswith('in use'), s"

# the SDK harness stays the entry point
ENTRYPOINT ["/opt/apache/beam/boot"]
