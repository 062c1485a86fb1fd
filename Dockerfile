# The keel binary, for `keel worker` (and the other commands) in containers.
FROM golang:1.26 AS build
ENV GOTOOLCHAIN=go1.27.3
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/keel ./cmd/keel

FROM gcr.io/distroless/static-debian12
COPY --from=build /out/keel /usr/local/bin/keel
WORKDIR /work
ENTRYPOINT ["/usr/local/bin/keel"]
CMD ["worker"]
