# The keel binary, for `keel worker`, `keel codec` and the other commands
# in containers (docker-compose.yml). Every base image is pinned.
FROM golang:1.27.3-bookworm AS build
# go.temporal.io/server v1.32.2 needs Go >= 1.26.10.
ENV GOTOOLCHAIN=go1.27.3
WORKDIR /src
# keel is a Go workspace of two modules (go.work; the keel command is in
# the server module), so the whole tree comes in before the build resolves
# them.
COPY . .
# The production build: -tags nodev leaves out keel dev's embedded Temporal
# server, Web UI and NATS server (docs/ARCHITECTURE.md, "Binaries").
RUN CGO_ENABLED=0 go build -tags nodev -trimpath -o /out/keel ./server/cmd/keel

# Alpine rather than distroless: the health checks need wget, and the
# shell tool, when enabled, needs programs to run. CA certificates come
# with the base image (model providers are reached over HTTPS).
FROM alpine:3.22
RUN adduser -D -u 10001 keel && mkdir -p /work/workspace && chown -R keel /work
COPY --from=build /out/keel /usr/local/bin/keel
USER keel
WORKDIR /work
ENTRYPOINT ["/usr/local/bin/keel"]
CMD ["worker"]
