# queuectl image: the controller (`queuectl controller`) and the GPU node agent run from it.
# Build: docker build -t queuectl:0.1.0 .     Without Docker: `make image` (deploy/image/build.sh),
# the same layout from Debian packages, packed with umoci.
# The base is pinned by digest (python 3.11.10, Debian bookworm slim) so a rebuild gets the same
# bytes; bump tag and digest together.
ARG PYTHON_IMAGE=python:3.11.10-slim-bookworm@sha256:5148c0e4bbb64271bca1d3322360ebf4bfb7564507ae32dd639322e4952a6b16

# --- build: install the locked dependencies, then the package, into a self-contained venv -------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/queuectl
WORKDIR /src
# The lock first, alone: the dependency layer is reused across source-only changes, and every
# wheel's hash is checked against it.
COPY deploy/image/requirements.lock ./
RUN /opt/queuectl/bin/pip install --require-hashes --only-binary=:all: -r requirements.lock
COPY pyproject.toml README.md ./
COPY queuectl ./queuectl
RUN /opt/queuectl/bin/pip install --no-deps . \
 && /opt/queuectl/bin/python -c "import queuectl.cli.main" \
 && /opt/queuectl/bin/pip uninstall --yes pip

# --- runtime: slim, no build tools, non-root ---------------------------------------------------
FROM ${PYTHON_IMAGE}
ENV PATH=/opt/queuectl/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN groupadd --system --gid 65532 queuectl \
 && useradd --system --uid 65532 --gid 65532 --no-create-home --home-dir /nonexistent \
      --shell /usr/sbin/nologin queuectl
COPY --from=build /opt/queuectl /opt/queuectl
# Numeric, so Kubernetes can verify runAsNonRoot without resolving the name.
USER 65532:65532
WORKDIR /tmp
ENTRYPOINT ["queuectl"]
CMD ["controller"]
