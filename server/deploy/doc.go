// Package deploy holds the files of keel's Docker Compose deployment
// (docker-compose.yml at the repository root): the Temporal server's
// dynamic config and the Prometheus configuration. It has no code; its
// test checks the compose file against keel's code, since no Docker engine
// runs in CI: the file parses, every image is pinned (the Temporal
// server's to the version in server/go.mod), every environment variable
// keel's code reads is set for the workers, every long-running service has
// a health check and a restart policy, and the dynamic config is the one
// `keel dev` runs with.
package deploy
