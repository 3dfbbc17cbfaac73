package main

import (
	"errors"
	"os"
)

// inClusterTokenFile is where the kubelet mounts a pod's service-account token.
var inClusterTokenFile = "/var/run/secrets/kubernetes.io/serviceaccount/token" //nolint:gosec // G101: a path, not a credential

// errLocalRuntimeInCluster refuses the local runtime inside a cluster: its adapters and
// stdio children run as the manager, beside its credentials (the in-cluster token above
// all), so every tenant who may create a SkillServer or a RemoteToolImport would act
// with the operator's power. It is for a laptop or CI with one trusted user.
var errLocalRuntimeInCluster = errors.New("--runtime=local runs every tenant's adapters and stdio commands " +
	"inside this manager, with its service-account token and files: it is single-tenant, for a laptop or CI, " +
	"and this manager runs inside a cluster (KUBERNETES_SERVICE_HOST is set or a service-account token is mounted); " +
	"use --runtime=kubernetes, or pass --allow-local-runtime-in-cluster if every tenant is trusted with the operator's power")

// checkLocalRuntime returns errLocalRuntimeInCluster for the local runtime in a cluster
// unless the admin said it is meant.
func checkLocalRuntime(runtime string, allowInCluster bool) error {
	if runtime != "local" || allowInCluster || !runningInCluster() {
		return nil
	}
	return errLocalRuntimeInCluster
}

// runningInCluster reports whether this process looks like a pod: the kubelet sets
// KUBERNETES_SERVICE_HOST and mounts a service-account token unless told not to.
func runningInCluster() bool {
	if os.Getenv("KUBERNETES_SERVICE_HOST") != "" {
		return true
	}
	_, err := os.Stat(inClusterTokenFile)
	return err == nil
}
