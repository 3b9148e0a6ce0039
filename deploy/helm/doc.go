// Package helm holds the tests of the hookwheel Helm chart (hookwheel/) and of the Docker Compose
// file beside it: a module of its own, so that Helm's and Kubernetes' dependencies stay out of
// hookwheel's.
package helm
