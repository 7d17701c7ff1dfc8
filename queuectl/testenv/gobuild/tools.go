//go:build tools

// Package tools pins the control-plane programs that queuectl/testenv builds, so that
// `go mod tidy` keeps their dependencies in go.sum.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
