#!/bin/sh
# The container's entry point: `switchboard-entrypoint [command...]` (default `serve`).
#
# - SWITCHBOARD_<NAME>_FILE=/run/secrets/x reads SWITCHBOARD_<NAME> from that file (Docker and
#   compose secrets), for any variable; setting both is an error that names them.
# - `serve` says which database it will use: SWITCHBOARD_DATABASE_URL when set (the embedded
#   PostgreSQL is then never started), else the embedded one under SWITCHBOARD_DATA_DIR, which
#   must be a volume or its data goes with the container.
# - Then it execs the switchboard command, so signals reach the server directly.
set -eu

app="${SWITCHBOARD_APP:-/app}"

for file_var in $(env | sed -n 's/^\(SWITCHBOARD_[A-Z0-9_]*\)_FILE=.*/\1/p'); do
  eval "file=\${${file_var}_FILE}"
  eval "already=\${${file_var}+set}"
  if [ "$already" = set ]; then
    echo "switchboard-entrypoint: both ${file_var} and ${file_var}_FILE are set; keep one" >&2
    exit 2
  fi
  if [ ! -r "$file" ]; then
    echo "switchboard-entrypoint: ${file_var}_FILE names $file, which cannot be read" >&2
    exit 2
  fi
  # Command substitution drops the trailing newline a secrets file usually ends with.
  value="$(cat "$file")"
  export "$file_var=$value"
  unset "${file_var}_FILE"
done

if [ "$#" -eq 0 ]; then set -- serve; fi

if [ "$1" = serve ]; then
  if [ -n "${SWITCHBOARD_DATABASE_URL:-}" ]; then
    echo "switchboard-entrypoint: database from SWITCHBOARD_DATABASE_URL (embedded PostgreSQL off)" >&2
  else
    echo "switchboard-entrypoint: no SWITCHBOARD_DATABASE_URL: embedded PostgreSQL under ${SWITCHBOARD_DATA_DIR:-the data dir} (mount a volume there, or its data is lost with the container)" >&2
  fi
fi

exec node "$app/bin/switchboard.js" "$@"
