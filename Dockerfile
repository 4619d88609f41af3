# syntax=docker/dockerfile:1
# writ: writd, writctl, writ and the writ-jobs handler plugin in one small
# image. Build: docker build -t writ --build-arg VERSION=$(git describe --tags --always --dirty) .
# Run one node: docker run --rm -p 127.0.0.1:7070:7070 -v writ-data:/var/lib/writ writ
# A 3-node cluster: docker compose -f deploy/compose.yaml up (docs/deploy.md).

FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=dev
ARG COMMIT=unknown
# Static binaries (pure Go: bbolt, etcd raft, serf), stamped like `make build`.
RUN CGO_ENABLED=0 make build BIN=/out VERSION="$VERSION" COMMIT="$COMMIT" \
 && mkdir -p /out/data

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/writd /out/writctl /out/writ /out/writ-jobs /usr/local/bin/
COPY --from=build --chown=65532:65532 /out/data /var/lib/writ
COPY LICENSE README.md /usr/share/doc/writ/
USER 65532:65532
VOLUME ["/var/lib/writ"]
# 7070 client gRPC API, 7071 raft, 7072 serf gossip (TCP and UDP), 7079 metrics and health.
EXPOSE 7070/tcp 7071/tcp 7072/tcp 7072/udp 7079/tcp
ENV PATH=/usr/local/bin
ENTRYPOINT ["/usr/local/bin/writd"]
# A single node reachable through published ports. raft and gossip stay on
# loopback: their addresses are advertised to peers, so a cluster gives each
# node its own routable address (deploy/compose.yaml). --insecure: this
# default is a plaintext try-out node; pass TLS and key settings for
# anything others can reach (docs/security.md).
CMD ["--node-id", "node1", "--data-dir", "/var/lib/writ", "--api-addr", "0.0.0.0:7070", "--raft-addr", "127.0.0.1:7071", "--gossip-addr", "127.0.0.1:7072", "--metrics-addr", "0.0.0.0:7079", "--insecure"]
