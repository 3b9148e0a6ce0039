// Package openapi holds hookwheel's HTTP API document, the source of truth,
// and the Go server interface, types and client generated from it.
//
// openapi.yaml is edited by hand; openapi.gen.go is generated from it by
// oapi-codegen with the configuration in oapi-codegen.yaml. After changing
// either, run:
//
//	go generate ./openapi
package openapi

//go:generate go tool oapi-codegen -config oapi-codegen.yaml openapi.yaml
