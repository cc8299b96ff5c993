# Sourced by cold_ci.sh and push_pull_clean_store.sh: start a second dockerd
# with its own empty store (NAME: data-root /var/lib/NAME, socket
# /run/NAME.sock) beside the host's engine, and export DOCKER_HOST to it.
# It gets its own bridge (BRIDGE, SUBNET) with a NAT rule of its own, and
# --iptables=false, so the host engine's rules and docker0 are not touched
# (builds need a bridge: with --bridge=none a RUN fails "network bridge not
# found"). stop_second_engine removes the engine, its store and the rules.
start_second_engine() {
    NAME="$1"; BRIDGE="$2"; SUBNET="$3"   # e.g. specsweep-cold spsw1 172.31.254.1/24
    NET="${SUBNET%.*}.0/${SUBNET#*/}"
    ROOT="/var/lib/$NAME"; SOCK="/run/$NAME.sock"
    rm -rf "$ROOT"; mkdir -p "$ROOT"
    ip link add name "$BRIDGE" type bridge
    ip addr add "$SUBNET" dev "$BRIDGE"
    ip link set "$BRIDGE" up
    iptables -t nat -A POSTROUTING -s "$NET" ! -o "$BRIDGE" -j MASQUERADE
    iptables -I DOCKER-USER -i "$BRIDGE" -j ACCEPT
    iptables -I DOCKER-USER -o "$BRIDGE" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT
    dockerd --data-root "$ROOT" --exec-root "/run/$NAME" --pidfile "/run/$NAME.pid" -H "unix://$SOCK" \
        --bridge="$BRIDGE" --iptables=false --ip-masq=false > "${LOG_DIR:-/tmp}/$NAME-dockerd.log" 2>&1 &
    SECOND_DOCKERD_PID=$!
    export DOCKER_HOST="unix://$SOCK"
    for _ in $(seq 60); do docker info >/dev/null 2>&1 && break; sleep 1; done
    docker info >/dev/null
}
stop_second_engine() {
    kill "$SECOND_DOCKERD_PID" 2>/dev/null || true
    wait "$SECOND_DOCKERD_PID" 2>/dev/null || true
    unset DOCKER_HOST
    iptables -t nat -D POSTROUTING -s "$NET" ! -o "$BRIDGE" -j MASQUERADE || true
    iptables -D DOCKER-USER -i "$BRIDGE" -j ACCEPT || true
    iptables -D DOCKER-USER -o "$BRIDGE" -m conntrack --ctstate RELATED,ESTABLISHED -j ACCEPT || true
    ip link del "$BRIDGE" || true
    rm -rf "$ROOT"
}
