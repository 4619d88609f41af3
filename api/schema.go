package api

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/writ-dev/writ/api/writv1"
)

// Schema returns the fingerprint and model of the schema this node runs
// (Config.Schema).
func (s *Server) Schema(context.Context, *writv1.SchemaRequest) (*writv1.SchemaResponse, error) {
	if s.cfg.Schema == nil {
		return nil, status.Error(codes.Unimplemented, "api: this node does not serve its schema model")
	}
	fp, model := s.cfg.Schema()
	return &writv1.SchemaResponse{SchemaFingerprint: fp, Model: model}, nil
}
