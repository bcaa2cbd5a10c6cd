// Package deploy holds the gateway's deployment files (deploy/compose.yaml
// and the Helm chart under deploy/helm) and their tests. It is a module of
// its own so the gateway's module does not take Helm's dependencies: run
// its tests with `cd deploy && go test ./...`.
package deploy
