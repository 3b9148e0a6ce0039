package openapi

import _ "embed"

//go:embed openapi.yaml
var spec []byte

// Spec returns the OpenAPI document, byte for byte the file openapi.yaml.
// It is what GET /openapi.yaml serves. Each call returns a fresh copy, so the
// caller may modify it.
func Spec() []byte {
	return append([]byte(nil), spec...)
}
