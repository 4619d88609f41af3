#!/bin/sh
# Regenerates the Go code for handler.proto. Generated files are renamed to
# end in _gen.go and are never edited by hand.
set -eu
cd "$(dirname "$0")"
PATH="$PATH:$(go env GOPATH)/bin"
protoc --go_out=. --go_opt=paths=source_relative \
	--go-grpc_out=. --go-grpc_opt=paths=source_relative \
	handler.proto
mv handler.pb.go handler_pb_gen.go
mv handler_grpc.pb.go handler_grpc_gen.go
