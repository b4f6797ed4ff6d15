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


def drop(caps):
    for kind in caps or {}:
        caps[kind] = [c for c in caps[kind] if c != "CAP_SYS_RESOURCE"]


def patch(path, process_only):
    if not path or not os.path.isfile(path):
        return
    with open(path) as f:
        doc = json.load(f)
    drop((doc if process_only else doc.get("process") or {}).get("capabilities"))
    with open(path, "w") as f:
        json.dump(doc, f)


args = sys.argv[1:]
bundle = process = None
for i, a in enumerate(args):
    nxt = args[i + 1] if i + 1 < len(args) else None
    if a in ("--bundle", "-b"):
        bundle = nxt
    elif a.startswith("--bundle="):
        bundle = a.split("=", 1)[1]
    elif a in ("--process", "-p"):
        process = nxt  # `runc exec`: the process spec docker exec runs
    elif a.startswith("--process="):
        process = a.split("=", 1)[1]
if bundle is None and {"create", "run"} & set(args):
    bundle = os.getcwd()  # runc's default bundle
patch(os.path.join(bundle, "config.json") if bundle else None, process_only=False)
patch(process, process_only=True)
os.execvp("runc", ["runc", *args])
PY
  chmod 0755 "$run/runc-without-sys-resource"
}

start() {
  if ! command -v dockerd >/dev/null; then
    # the host packages a kind lab needs, from the one list (kailab/data/kind-host.yaml)
    local pkgs
    pkgs=$(awk '/^  - name:/{print $3}' "$(dirname "$0")/kind-host.yaml")
    echo "installing $(echo $pkgs) (Debian packages)" >&2
    apt-get update -qq >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq $pkgs >&2
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
