#!/bin/sh
# HAProxy as Ray Serve starts it, but with its stats page and Prometheus exporter bound to
# 127.0.0.1 and its admin socket owner-only: Ray 2.60's HAProxy template binds both to every
# interface ("bind *:PORT", "bind :PORT") and makes the socket mode 666, with no setting to
# change either. It also forwards a request before its body has arrived, so a slow client
# holds a replica's request slot: here HAProxy buffers each request ("option
# http-buffer-request": its body, up to one buffer of tune.bufsize) and answers 408 itself
# when that has not arrived within $ARENA_HAPROXY_HTTP_REQUEST_S seconds ("timeout
# http-request"; Ray's template has no setting for either). Ray runs
# "$RAY_SERVE_HAPROXY_BINARY_PATH -db -f CONFIG ..."; the config is rewritten in place, then
# the real binary ($ARENA_HAPROXY_REAL) runs with the same arguments.
set -eu
config=""
previous=""
for arg in "$@"; do
    if [ "$previous" = "-f" ]; then config="$arg"; fi
    previous="$arg"
done
if [ -n "$config" ] && [ -f "$config" ]; then
    sed -i \
        -e 's/^\([[:space:]]*\)bind \*:\([0-9][0-9]*\)[[:space:]]*$/\1bind 127.0.0.1:\2/' \
        -e 's/^\([[:space:]]*\)bind :\([0-9][0-9]*\)[[:space:]]*$/\1bind 127.0.0.1:\2/' \
        -e 's/ mode 666 / mode 600 /' \
        "$config"
    if ! grep -q 'option http-buffer-request' "$config"; then
        sed -i "/^defaults[[:space:]]*\$/a\\
    option http-buffer-request\\
    timeout http-request ${ARENA_HAPROXY_HTTP_REQUEST_S:-5}s" "$config"
    fi
fi
exec "$ARENA_HAPROXY_REAL" "$@"
