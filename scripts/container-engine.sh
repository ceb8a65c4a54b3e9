#!/usr/bin/env bash
# A Docker-API container engine for the docker sandbox tests (tests/test_sandbox_docker.py) on a
# machine without a Docker daemon: Podman serving the Docker Engine API on a unix socket, and a
# minimal Debian image with bash and python3 built locally with debootstrap (no image registry
# is needed, only Debian's package archive).
#
#   eval "$(bash scripts/container-engine.sh start)"   # prints the DOCKER_HOST and SANDBOX_TEST_IMAGE exports
#   bash scripts/container-engine.sh stop              # stops the API service this script started
#   bash scripts/container-engine.sh status
#
# `start` is idempotent: it reuses an answering service and an existing image. The first start
# installs podman, runc and debootstrap with apt-get (root) and builds the image: about a minute
# and 150 MB of disk. Messages go to stderr, the exports alone to stdout; on failure `start`
# prints nothing to stdout and exits 1, and the docker tests skip saying so.
# Settings (environment): PKAGENT_ENGINE_DIR (state: socket, pid, logs, config; default
# /tmp/pkagent-engine), SANDBOX_TEST_IMAGE (default localhost/pkagent-test:bookworm).
set -u

DIR=${PKAGENT_ENGINE_DIR:-/tmp/pkagent-engine}
SOCK=$DIR/podman.sock
IMAGE=${SANDBOX_TEST_IMAGE:-localhost/pkagent-test:bookworm}
# Our own engine configuration, not the machine's: runc (crun cannot set rlimits in some
# containers-in-containers setups) and no default ulimits; the sandbox sets its own limits.
export CONTAINERS_CONF=$DIR/containers.conf

say() { echo "container-engine: $*" >&2; }

ping_ok() { curl -s --max-time 2 --unix-socket "$SOCK" http://engine/_ping 2>/dev/null | grep -q OK; }

install_tools() {
  local missing=()
  for t in podman runc debootstrap curl; do command -v "$t" >/dev/null || missing+=("$t"); done
  [ ${#missing[@]} -eq 0 ] && return 0
  [ "$(id -u)" -eq 0 ] && command -v apt-get >/dev/null || { say "missing ${missing[*]}; install them (root, apt-get)"; return 1; }
  say "installing ${missing[*]} with apt-get"
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq podman runc debootstrap curl) \
    >"$DIR/apt.log" 2>&1 || { say "apt-get install failed (see $DIR/apt.log)"; return 1; }
}

write_config() {
  printf '%s\n' '[containers]' 'default_ulimits = []' '[engine]' 'runtime = "runc"' > "$CONTAINERS_CONF"
}

start_service() {
  ping_ok && return 0
  rm -f "$SOCK"
  setsid podman system service --time=0 "unix://$SOCK" >"$DIR/podman.log" 2>&1 </dev/null &
  echo $! > "$DIR/podman.pid"
  for _ in $(seq 1 100); do ping_ok && return 0; sleep 0.2; done
  say "the Podman API did not answer on $SOCK within 20 s (see $DIR/podman.log)"
  return 1
}

build_image() {
  podman image exists "$IMAGE" && return 0
  say "building $IMAGE with debootstrap (about a minute)"
  local root
  root=$(mktemp -d "$DIR/rootfs.XXXX")
  if debootstrap --variant=minbase --include=python3 bookworm "$root" http://deb.debian.org/debian >"$DIR/debootstrap.log" 2>&1 \
    && tar -C "$root" -c . | podman import - "$IMAGE" >/dev/null 2>>"$DIR/debootstrap.log"; then
    rm -rf "$root"; return 0
  fi
  rm -rf "$root"
  say "could not build $IMAGE (see $DIR/debootstrap.log)"
  return 1
}

case "${1:-}" in
  start)
    mkdir -p "$DIR"
    install_tools && write_config && start_service && build_image || exit 1
    say "DOCKER_HOST=unix://$SOCK SANDBOX_TEST_IMAGE=$IMAGE"
    echo "export DOCKER_HOST=unix://$SOCK SANDBOX_TEST_IMAGE=$IMAGE"
    ;;
  stop)
    if [ -f "$DIR/podman.pid" ]; then kill "$(cat "$DIR/podman.pid")" 2>/dev/null; rm -f "$DIR/podman.pid" "$SOCK"; fi
    ;;
  status)
    if ping_ok; then echo "answering on unix://$SOCK"; else echo "not running"; exit 1; fi
    ;;
  *)
    echo "usage: bash scripts/container-engine.sh start|stop|status" >&2; exit 2
    ;;
esac
