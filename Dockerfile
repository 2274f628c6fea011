# The zerolayer binary (pure Go, no cgo) on a small base image.
FROM golang:1.26 AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -o /out/zerolayer ./cmd/zerolayer

FROM gcr.io/distroless/static-debian12
COPY --from=build /out/zerolayer /usr/local/bin/zerolayer
ENV ZEROLAYER_MODEL_PATH=/models
ENTRYPOINT ["/usr/local/bin/zerolayer"]
