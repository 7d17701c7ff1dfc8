# queuectl image: the controller (`queuectl controller`) and the GPU node agent run from it.
# Build: docker build -t queuectl:0.1.0 .
ARG PYTHON_IMAGE=python:3.11-slim

# --- build: install the package and its dependencies into a self-contained venv ---------------
FROM ${PYTHON_IMAGE} AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
RUN python -m venv /opt/queuectl
WORKDIR /src
# Metadata first so the dependency layer is cached across source-only changes.
COPY pyproject.toml README.md ./
COPY queuectl ./queuectl
RUN /opt/queuectl/bin/pip install . \
 && /opt/queuectl/bin/python -c "import queuectl"

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
