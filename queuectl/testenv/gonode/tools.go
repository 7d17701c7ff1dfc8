//go:build tools

// Package tools pins the real-node programs (kubelet, kube-proxy, CNI plugins) that
// queuectl/testenv/realnode.py builds, so that `go mod tidy` keeps their dependencies in go.sum.
package tools

import (
	_ "github.com/containernetworking/plugins/plugins/ipam/host-local"
	_ "github.com/containernetworking/plugins/plugins/main/bridge"
	_ "github.com/containernetworking/plugins/plugins/main/loopback"
	_ "github.com/containernetworking/plugins/plugins/meta/portmap"
	_ "k8s.io/kubernetes/cmd/kube-proxy"
	_ "k8s.io/kubernetes/cmd/kubelet"
)
