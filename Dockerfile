# voucherd in a container: built in Go's image, run as a non-root user in a
# distroless one (no shell, no package manager). Not built on the
# development machines, which reach no image registry: keep it minimal.
#   docker build -t voucherd .
#   docker run --env-file /etc/voucherd/voucherd.env -p 8080:8080 voucherd
# The golang tag is go.mod's go line (deploy/deploy_test.go checks it).
FROM golang:1.26.8-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags='-s -w' -o /out/voucherd ./cmd/voucherd

FROM gcr.io/distroless/static-debian12:nonroot
COPY --from=build /out/voucherd /usr/local/bin/voucherd
USER nonroot:nonroot
ENV APP_ENV=production HTTP_ADDR=:8080
EXPOSE 8080
ENTRYPOINT ["/usr/local/bin/voucherd"]
CMD ["serve"]
