#!/usr/bin/env bash
# Host set-up for kind labs on a machine without a Docker service (no systemd, e.g. a CI sandbox):
# starts a private dockerd on its own socket and data root, so nothing else on the host sees it and
# kailab's `--runtime auto` keeps picking the binary runtime unless DOCKER_HOST points here.
# This is host set-up, not part of kailab's runtime code (docs/kind-runtime.md, "Hosts").
#
#   eval "$(kailab/data/docker-host.sh start)"   # installs docker.io if missing, prints DOCKER_HOST
#   kailab/data/docker-host.sh stop              # stops it (images stay in the data root)
#
# Hosts whose capability bounding set lacks CAP_SYS_RESOURCE: Debian's dockerd fails every
# `--privileged` container there ("unable to apply caps: operation not permitted"), and kind's
# node is privileged. The daemon then runs containers through a small runc wrapper that drops
# that one capability from each container's OCI spec before calling runc.
set -euo pipefail

cache=${KAILAB_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/kailab}
run=${KAILAB_DOCKER_RUN:-/run/kailab-docker}
data=${KAILAB_DOCKER_DATA:-$cache/docker}
sock=$run/docker.sock

cap_sys_resource_missing() {
  local bnd
  bnd=$(awk '/^CapBnd:/{print $2}' /proc/self/status)
  (( (16#$bnd >> 24 & 1) == 0 ))
}

write_runc_wrapper() {
  cat >"$run/runc-without-sys-resource" <<'PY'
#!/usr/bin/env python3
# runc, minus CAP_SYS_RESOURCE in the container's spec (the host cannot grant it).
import json, os, sys
args = sys.argv[1:]
bundle = None
for i, a in enumerate(args):
    if a in ("--bundle", "-b") and i + 1 < len(args):
        bundle = args[i + 1]
    elif a.startswith("--bundle="):
        bundle = a.split("=", 1)[1]
if bundle is None and {"create", "run"} & set(args):
    bundle = os.getcwd()  # runc's default bundle
spec = os.path.join(bundle, "config.json") if bundle else None
if spec and os.path.isfile(spec):
    with open(spec) as f:
        conf = json.load(f)
    caps = (conf.get("process") or {}).get("capabilities") or {}
    for kind in caps:
        caps[kind] = [c for c in caps[kind] if c != "CAP_SYS_RESOURCE"]
    with open(spec, "w") as f:
        json.dump(conf, f)
os.execvp("runc", ["runc", *args])
PY
  chmod 0755 "$run/runc-without-sys-resource"
}

start() {
  if ! command -v dockerd >/dev/null; then
    echo "installing docker.io (Debian package)" >&2
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq docker.io iptables >&2
  fi
  mkdir -p "$run" "$data"
  if [ -S "$sock" ] && DOCKER_HOST=unix://$sock docker info >/dev/null 2>&1; then
    echo "export DOCKER_HOST=unix://$sock"
    return
  fi
  local extra=()
  if cap_sys_resource_missing; then
    write_runc_wrapper
    extra+=(--add-runtime "kailab-runc=$run/runc-without-sys-resource" --default-runtime kailab-runc)
  fi
  nohup dockerd -H "unix://$sock" --data-root "$data" --exec-root "$run/exec" --pidfile "$run/dockerd.pid" \
    --bridge none --ip 127.0.0.1 "${extra[@]}" >"$run/dockerd.log" 2>&1 &
  for _ in $(seq 1 60); do
    if DOCKER_HOST=unix://$sock docker info >/dev/null 2>&1; then
      echo "export DOCKER_HOST=unix://$sock"
      return
    fi
    sleep 1
  done
  echo "dockerd did not answer on $sock within 60 s; its log: $run/dockerd.log" >&2
  tail -5 "$run/dockerd.log" >&2
  exit 1
}

stop() {
  [ -f "$run/dockerd.pid" ] || return 0
  local pid
  pid=$(cat "$run/dockerd.pid")
  kill "$pid" 2>/dev/null || true
  for _ in $(seq 1 30); do kill -0 "$pid" 2>/dev/null || break; sleep 1; done
  kill -9 "$pid" 2>/dev/null || true
  rm -f "$run/dockerd.pid"
}

case "${1:-}" in
  start) start ;;
  stop) stop ;;
  *) echo "usage: $0 start|stop" >&2; exit 2 ;;
esac
