// Package writv1 holds the generated Go code of the writ.v1 gRPC service
// (writ.proto). Regenerate with `go generate ./api/writv1` (needs protoc,
// protoc-gen-go and protoc-gen-go-grpc on PATH).
package writv1

//go:generate sh -c "protoc --go_out=. --go_opt=paths=source_relative --go-grpc_out=. --go-grpc_opt=paths=source_relative writ.proto && mv writ.pb.go writ_pb_gen.go && mv writ_grpc.pb.go writ_grpc_pb_gen.go"
