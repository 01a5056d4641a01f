// Package deploy holds no code: it is the home of the tests of the
// deployment files beside it (Dockerfile, docker-compose.yml, pgq.service,
// and the repository's .dockerignore), so that they live with what they
// test.
//
// deploy_test.go reads those files as Docker, Compose and systemd read
// them and holds them to what running pgq in them needs; deploy_run_test.go
// runs the pgq binary as the image and the unit would (and, where a Docker
// daemon answers, builds and runs the image). The monitoring files
// (prometheus/, grafana/) are checked by the prometheus module, a Go
// module of its own.
package deploy
