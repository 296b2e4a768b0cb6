// Package k8s is psych serve's end-to-end test on a real Kubernetes cluster:
// `make k8s-test` starts one on this machine (cluster.sh up: Kubernetes
// built from its sources by build.sh, Debian's etcd, a containerd of the
// lane's own), applies deploy/kubernetes (through overlay/, which raises
// two caps for the contract cases), runs the tests of this package
// (built with -tags k8s, so `go test ./...` never sees them) through each
// pod's API over TCP with the token, and takes everything down again
// (cluster.sh down), checking nothing of it is left (cluster.sh verify).
//
// The tests read KUBECONFIG and PSYCH_K8S_KUBECTL (cluster.sh env prints
// them); without a cluster they fail in CI and skip elsewhere.
package k8s
