# syntax=docker/dockerfile:1
#
# One image for the three waitroom processes. It has no fixed ENTRYPOINT:
# docker-compose.yml picks the binary per service with `command`
# (gateway | admitter | booking serve | booking migrate …).

# --- build ---------------------------------------------------------------
FROM golang:1.26 AS build
WORKDIR /src
# Modules first, so that a source change does not download them again.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY . .
# Static binaries: the runtime stage has no Go toolchain and needs no libc match.
ENV CGO_ENABLED=0
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    go build -trimpath -ldflags="-s -w" -o /out/ ./cmd/gateway ./cmd/admitter ./cmd/booking

# --- runtime -------------------------------------------------------------
# debian-slim rather than distroless: the one-shot services need a shell
# (`booking migrate && booking seed`), keygen needs openssl, and the compose
# healthchecks need curl.
FROM debian:bookworm-slim
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates curl openssl \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --user-group --home-dir /var/lib/waitroom --create-home waitroom \
 && install -d -o waitroom -g waitroom -m 0700 /var/lib/waitroom/keys
COPY --from=build /out/ /usr/local/bin/
WORKDIR /var/lib/waitroom
USER waitroom
EXPOSE 8080 8081 8082
CMD ["gateway"]
